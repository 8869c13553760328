//! Structured Field Dictionaries (RFC 8941 §3.2, parsed as §4.2.2 says), as far as targeted
//! cache control needs them (RFC 9213 §2.1): every member's key and value, parameters parsed
//! and dropped. Strict: any syntax error fails the whole field, which the caller then ignores.
//! Borrows the input; allocates nothing.

/// A member's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Integer(i64),
    /// A decimal, kept as its text (no directive takes one).
    Decimal(&'a [u8]),
    /// The inside of a string, escapes (`\"`, `\\`) still in place.
    String(&'a [u8]),
    Token(&'a [u8]),
    /// A byte sequence, still base64 (no directive takes one).
    Binary(&'a [u8]),
    Boolean(bool),
    /// An inner list (no directive takes one).
    InnerList,
}

/// A syntax error: the field is not a valid Dictionary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid;

/// Parses `input` (the field's lines joined by `,`, RFC 8941 §4.2) as a Dictionary and hands
/// every member to `member` in order; a key that occurs again is handed again (§4.2.2: the
/// last occurrence wins, which the caller implements by overwriting). An empty or all-space
/// input is a Dictionary without members.
pub fn parse_dictionary<'a>(
    input: &'a [u8],
    mut member: impl FnMut(&'a [u8], Value<'a>),
) -> Result<(), Invalid> {
    let mut p = Parser { input, at: 0 };
    p.skip_sp();
    if p.at == input.len() {
        return Ok(());
    }
    loop {
        let key = p.key()?;
        let value = if p.eat(b'=') {
            p.member_value()?
        } else {
            p.parameters()?;
            Value::Boolean(true)
        };
        member(key, value);
        p.skip_ows();
        if p.at == input.len() {
            return Ok(());
        }
        if !p.eat(b',') {
            return Err(Invalid);
        }
        p.skip_ows();
        if p.at == input.len() {
            return Err(Invalid); // a trailing comma
        }
    }
}

struct Parser<'a> {
    input: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.input.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let found = self.peek() == Some(b);
        self.at += usize::from(found);
        found
    }

    fn skip_sp(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }

    /// The bytes from `start` while `keep` holds.
    fn take_while(&mut self, start: usize, keep: impl Fn(u8) -> bool) -> &'a [u8] {
        while self.peek().is_some_and(&keep) {
            self.at += 1;
        }
        &self.input[start..self.at]
    }

    /// `key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )` (§3.1.2).
    fn key(&mut self) -> Result<&'a [u8], Invalid> {
        let start = self.at;
        match self.peek() {
            Some(b) if b.is_ascii_lowercase() || b == b'*' => self.at += 1,
            _ => return Err(Invalid),
        }
        Ok(self.take_while(start, |b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b)
        }))
    }

    /// `member-value = sf-item / inner-list`.
    fn member_value(&mut self) -> Result<Value<'a>, Invalid> {
        if self.eat(b'(') {
            self.inner_list()?;
            self.parameters()?;
            return Ok(Value::InnerList);
        }
        let value = self.bare_item()?;
        self.parameters()?;
        Ok(value)
    }

    /// `inner-list = "(" *SP [ sf-item *( 1*SP sf-item ) *SP ] ")" parameters`, after "(".
    fn inner_list(&mut self) -> Result<(), Invalid> {
        loop {
            self.skip_sp();
            if self.eat(b')') {
                return Ok(());
            }
            self.bare_item()?;
            self.parameters()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return Err(Invalid);
            }
        }
    }

    /// `parameters = *( ";" *SP param-key [ "=" param-value ] )`, dropped (RFC 9213 §2.1:
    /// "Parameters received on cache directives are to be ignored").
    fn parameters(&mut self) -> Result<(), Invalid> {
        while self.eat(b';') {
            self.skip_sp();
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Ok(())
    }

    fn bare_item(&mut self) -> Result<Value<'a>, Invalid> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'"') => self.string(),
            Some(b':') => self.binary(),
            Some(b'?') => self.boolean(),
            Some(b) if b.is_ascii_alphabetic() || b == b'*' => {
                let start = self.at;
                Ok(Value::Token(self.take_while(start, is_token_char)))
            }
            _ => Err(Invalid),
        }
    }

    /// `sf-integer = ["-"] 1*15DIGIT`, `sf-decimal = ["-"] 1*12DIGIT "." 1*3DIGIT` (§4.2.4).
    fn number(&mut self) -> Result<Value<'a>, Invalid> {
        let start = self.at;
        let negative = self.eat(b'-');
        let whole = self.take_while(self.at, |b| b.is_ascii_digit()).len();
        if whole == 0 {
            return Err(Invalid);
        }
        if !self.eat(b'.') {
            if whole > 15 {
                return Err(Invalid);
            }
            let digits = &self.input[start + usize::from(negative)..self.at];
            let n = digits
                .iter()
                .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
            return Ok(Value::Integer(if negative { -n } else { n }));
        }
        let fraction = self.take_while(self.at, |b| b.is_ascii_digit()).len();
        if whole > 12 || fraction == 0 || fraction > 3 {
            return Err(Invalid);
        }
        Ok(Value::Decimal(&self.input[start..self.at]))
    }

    /// `sf-string = DQUOTE *chr DQUOTE`, where a backslash escapes only `"` and `\` (§4.2.5).
    fn string(&mut self) -> Result<Value<'a>, Invalid> {
        self.at += 1;
        let start = self.at;
        loop {
            match self.peek() {
                Some(b'"') => {
                    let inside = &self.input[start..self.at];
                    self.at += 1;
                    return Ok(Value::String(inside));
                }
                Some(b'\\') => {
                    self.at += 1;
                    if !matches!(self.peek(), Some(b'"' | b'\\')) {
                        return Err(Invalid);
                    }
                    self.at += 1;
                }
                Some(0x20..=0x7e) => self.at += 1,
                _ => return Err(Invalid),
            }
        }
    }

    /// `sf-binary = ":" *(base64) ":"` (§4.2.7).
    fn binary(&mut self) -> Result<Value<'a>, Invalid> {
        self.at += 1;
        let start = self.at;
        let inside = self.take_while(start, |b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
        if !self.eat(b':') {
            return Err(Invalid);
        }
        Ok(Value::Binary(inside))
    }

    /// `sf-boolean = "?" ( "0" / "1" )` (§4.2.8).
    fn boolean(&mut self) -> Result<Value<'a>, Invalid> {
        self.at += 1;
        let value = match self.peek() {
            Some(b'0') => false,
            Some(b'1') => true,
            _ => return Err(Invalid),
        };
        self.at += 1;
        Ok(Value::Boolean(value))
    }
}

/// `sf-token = ( ALPHA / "*" ) *( tchar / ":" / "/" )` after its first character.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(input: &str) -> Result<Vec<(String, Value<'_>)>, Invalid> {
        let mut out = Vec::new();
        parse_dictionary(input.as_bytes(), |k, v| {
            out.push((String::from_utf8_lossy(k).into_owned(), v))
        })?;
        Ok(out)
    }

    #[test]
    fn members_of_every_type() {
        let got = members(
            "max-age=60, no-store, private=?0, a=\"x\\\"y\", t=abc:/d, d=1.5, b=:AQ==:, \
             l=(1 \"two\");p=1, s-maxage=-3;x=y",
        )
        .unwrap();
        let want = [
            ("max-age", Value::Integer(60)),
            ("no-store", Value::Boolean(true)),
            ("private", Value::Boolean(false)),
            ("a", Value::String(b"x\\\"y")),
            ("t", Value::Token(b"abc:/d")),
            ("d", Value::Decimal(b"1.5")),
            ("b", Value::Binary(b"AQ==")),
            ("l", Value::InnerList),
            ("s-maxage", Value::Integer(-3)),
        ];
        assert_eq!(got.len(), want.len());
        for ((k, v), (wk, wv)) in got.iter().zip(want) {
            assert_eq!((k.as_str(), *v), (wk, wv));
        }
    }

    #[test]
    fn empty_input_has_no_members_and_duplicates_come_in_order() {
        assert_eq!(members("").unwrap().len(), 0);
        assert_eq!(members("   ").unwrap().len(), 0);
        let twice = members("max-age=1, max-age=2").unwrap();
        assert_eq!(twice[1].1, Value::Integer(2));
    }

    #[test]
    fn syntax_errors_fail_the_whole_field() {
        for bad in [
            "Max-Age=60",
            "max-age=60,",
            ",max-age=60",
            "max-age=60 no-store",
            "max-age=",
            "max-age=1234567890123456",
            "d=1.2345",
            "d=1.",
            "a=\"unterminated",
            "a=\"bad\\escape\"",
            "b=:abc",
            "x=?2",
            "l=(1 2",
            "l=(1,2)",
            "k;=1",
            "max-age=60;Q=1",
            "1abc",
            "max-age=\"60\"x",
        ] {
            assert_eq!(members(bad).map(|m| m.len()), Err(Invalid), "{bad}");
        }
    }

    #[test]
    fn whitespace_around_commas_is_allowed() {
        let got = members("max-age=60 ,\tno-store").unwrap();
        assert_eq!(got.len(), 2);
    }
}
