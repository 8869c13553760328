#!/usr/bin/env python3
"""Tests of scripts/check_layers.py on small synthetic crates written to a temp dir.

Run: python3 -m unittest scripts/test_check_layers.py   or   python3 scripts/test_check_layers.py
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers as cl  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_tree(root: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(textwrap.dedent(text).lstrip("\n"))


def fn_of(name: str, lines: int, indent: str = "", filler: str = "let _x = 1;") -> str:
    """A fn that is `lines` lines long from `fn` to its closing brace."""
    body = [f"{indent}    {filler}"] * (lines - 2)
    return "\n".join([f"{indent}fn {name}() {{", *body, f"{indent}}}"]) + "\n"


def line_of(text: str, needle: str) -> int:
    for i, line in enumerate(textwrap.dedent(text).lstrip("\n").split("\n"), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in text")


# The synthetic crate: layers lib.rs / alpha / beta, gamma (peers) / net / util, plus an
# unassigned extra.rs.
LIB = """
    //! Root. A doc comment naming crate::gamma::one::make() is not an import.
    mod alpha;
    mod beta;
    mod extra;
    mod gamma;
    mod net;
    mod util;
    #[cfg(test)]
    mod test_support;

    pub use alpha::Thing;
"""

# cycle alpha <-> beta: a grouped `use` over several lines one way, an inline path the other
ALPHA = """
    use crate::{
        beta::{self, Beta},
        util::helper,
    };

    pub struct Thing;

    pub fn go() -> Beta {
        helper();
        beta::make()
    }
"""

BETA = """
    use std::fmt;

    use crate::gamma::One;

    pub struct Beta;

    pub fn make() -> Beta {
        let _t = crate::alpha::Thing;
        let _s = "crate::util::helper() in a string is not a path {";
        let _c = '{';
        Beta
    }

    impl fmt::Debug for Beta {
""" + textwrap.indent(fn_of("fmt_long", 90, filler='let _s = "}";'), "    ") + """
    }

""" + fn_of("exactly_eighty", 80) + fn_of("eighty_one", 81, filler="let _b = b'}';") + """
    fn outer() {
""" + textwrap.indent(fn_of("nested_long", 85, filler="/* } */ let _x = 1;"), "    ") + """
    }

    #[cfg(test)]
""" + fn_of("test_helper_long", 120)

GAMMA_MOD = """
    // A comment naming TcpStream is fine.
    mod one;
    mod two;

    pub use one::One;
"""

# cycle gamma/one <-> gamma/two through `use super::..` one way, inline super:: the other
GAMMA_ONE = """
    //! Speaks of HTTP/1.1 and CRLF in a comment: fine.
    use sepia_http1::{HeaderId, Method};
    use sepia_http1::{
        HeaderId as Id,
        BodyFraming,
    };

    use super::two::Two;

    /// A doc comment about a TcpStream and "\\r\\n" is fine too.
    pub fn make() -> &'static [u8] {
        b"HTTP/1.1 200 OK\\r\\n"
    }

    pub struct One;

    pub fn sock(_s: tokio::net::TcpStream, _t: Two, _i: Id, _m: Method, _h: HeaderId) {}

    pub fn frame() -> BodyFraming {
        sepia_http1::BodyFraming::Chunked
    }

    pub fn header() -> HeaderId {
        sepia_http1::HeaderId::Host
    }
"""

GAMMA_TWO = """
    pub struct Two;

    pub fn f() {
        let _ = super::one::make();
        let _ = b"\\r\\n"; // exempt: gamma/two is in the rule's except list
    }
"""

NET = """
    pub fn ping() {
        crate::util::helper();
    }
"""

# util/mod.rs declares `mod inner;` (not an edge), inner uses super (an edge back): no cycle.
# Its tests module imports upward and holds braces in strings, chars and comments; the fn
# after it still counts (util -> net, closing the util <-> net cycle, and an upward import).
UTIL_MOD = """
    mod inner;

    pub fn helper() -> &'static str {
        "}"
    }

    pub const OPEN: char = '{';

    #[cfg(test)]
    mod tests {
        use crate::alpha::Thing;
        use crate::gamma::{self, One};
        const S: &str = "}}}";
        const C: char = '}';
        const R: &str = r#"}"}"#;
        // }
        /* } /* } */ */

        #[test]
        fn t() {
            let _ = crate::beta::make();
            let _ = (Thing, One, S, C, R);
        }
    }

    pub fn after_tests() {
        crate::net::ping();
    }
"""

UTIL_INNER = """
    use super::helper;

    pub fn g() -> &'static str {
        helper()
    }
"""

EXTRA = """
    pub fn nothing() {}
"""

TEST_SUPPORT = """
    use crate::alpha::Thing;
""" + fn_of("huge_test_helper", 200)

TESTS_DIR = """
    use crate::alpha::Thing;
    pub fn helper() { crate::beta::make(); }
"""

CONFIG = """
    [syn]
    src = "unused"
    layers = [["lib.rs"], ["alpha"], ["beta", "gamma"], ["net"], ["util"]]
    max_fn_lines = 80

    [[syn.forbid]]
    under = ["gamma"]
    except = ["gamma/two"]
    words = ['\\bTcpStream\\b', '\\bCRLF\\b', 'HTTP/1\\.[01]', '\\\\r\\\\n', 'sepia_http1::(?!(HeaderId|Method)\\b)']
    why = "h1 stays out"
"""


class SyntheticCrate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.src = os.path.join(cls.tmp.name, "src")
        write_tree(cls.src, {
            "lib.rs": LIB, "alpha.rs": ALPHA, "beta.rs": BETA, "extra.rs": EXTRA,
            "gamma/mod.rs": GAMMA_MOD, "gamma/one.rs": GAMMA_ONE, "gamma/two.rs": GAMMA_TWO,
            "net.rs": NET, "util/mod.rs": UTIL_MOD, "util/inner.rs": UTIL_INNER,
            "test_support.rs": TEST_SUPPORT, "tests/helpers.rs": TESTS_DIR,
        })
        cls.config_path = os.path.join(cls.tmp.name, "scripts", "layers.toml")
        write_tree(cls.tmp.name, {"scripts/layers.toml": CONFIG})
        cls.cfg, _ = cl.load_config(cls.config_path, "syn")
        cls.crate = cl.Crate(cls.src)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def cli(self, *args: str) -> tuple[int, str]:
        out = io.StringIO()
        rc = cl.run(["--src", self.src, "--config", self.config_path, "--crate", "syn", *args],
                    stdout=out)
        return rc, out.getvalue()

    # --- files and the graph

    def test_test_files_are_left_out(self):
        self.assertNotIn("test_support.rs", self.crate.files)  # #[cfg(test)] mod test_support;
        self.assertNotIn("tests/helpers.rs", self.crate.files)  # under tests/
        self.assertIn("extra.rs", self.crate.files)

    def test_grouped_multiline_use_makes_edges_on_member_lines(self):
        edges = self.crate.edges["alpha.rs"]
        self.assertEqual(edges["beta.rs"][0], line_of(ALPHA, "beta::{self"))
        self.assertEqual(edges["util/mod.rs"], [line_of(ALPHA, "util::helper")])

    def test_module_alias_from_use_self_resolves_inline_paths(self):
        # `beta::{self, ..}` binds `beta`, so `beta::make()` in code is an edge too
        self.assertEqual(self.crate.edges["alpha.rs"]["beta.rs"],
                         [line_of(ALPHA, "beta::{self"), line_of(ALPHA, "beta::make()")])

    def test_inline_crate_path_is_an_edge_but_not_in_strings_or_comments(self):
        self.assertEqual(self.crate.edges["beta.rs"]["alpha.rs"],
                         [line_of(BETA, "crate::alpha::Thing")])
        self.assertNotIn("util/mod.rs", self.crate.edges["beta.rs"])  # only in a string
        self.assertEqual(self.crate.edges["lib.rs"], {"alpha.rs": [line_of(LIB, "pub use")]})

    def test_super_paths_resolve_against_the_parent_module(self):
        self.assertEqual(self.crate.edges["gamma/one.rs"],
                         {"gamma/two.rs": [line_of(GAMMA_ONE, "super::two")]})
        self.assertEqual(self.crate.edges["gamma/two.rs"],
                         {"gamma/one.rs": [line_of(GAMMA_TWO, "super::one::make")]})
        self.assertEqual(self.crate.edges["util/inner.rs"],
                         {"util/mod.rs": [line_of(UTIL_INNER, "use super::helper")]})

    def test_mod_declaration_is_not_an_edge_but_pub_use_of_a_child_is(self):
        self.assertNotIn("util/inner.rs", self.crate.edges["util/mod.rs"])
        self.assertEqual(self.crate.edges["gamma/mod.rs"],
                         {"gamma/one.rs": [line_of(GAMMA_MOD, "pub use one::One")]})

    def test_cfg_test_module_is_ignored_and_code_after_it_is_not(self):
        self.assertEqual(self.crate.edges["util/mod.rs"],
                         {"net.rs": [line_of(UTIL_MOD, "crate::net::ping")]})

    def test_cycles(self):
        found = cl.check_cycles(self.crate)
        comps = sorted(f.data["files"] for f in found)
        self.assertEqual(comps, [["alpha.rs", "beta.rs"],
                                 ["gamma/one.rs", "gamma/two.rs"],
                                 ["net.rs", "util/mod.rs"]])
        by_first = {f.data["files"][0]: f for f in found}
        example = by_first["alpha.rs"].data["example"]
        self.assertEqual([(s["from"], s["to"], s["lines"]) for s in example], [
            ("alpha.rs", "beta.rs", [line_of(ALPHA, "beta::{self"),
                                     line_of(ALPHA, "beta::make()")]),
            ("beta.rs", "alpha.rs", [line_of(BETA, "crate::alpha::Thing")]),
        ])
        self.assertEqual(by_first["alpha.rs"].file, "alpha.rs")
        self.assertEqual(by_first["alpha.rs"].line, line_of(ALPHA, "beta::{self"))

    # --- layers

    def test_layers_upward_sideways_and_unassigned(self):
        warnings: list[str] = []
        found = cl.check_layers(self.crate, self.cfg, warnings)
        got = sorted((f.file, f.line, f.message.split(" -- ")[1].split(":")[0]
                      if " -- " in f.message else f.message) for f in found)
        self.assertEqual(got, sorted([
            ("beta.rs", line_of(BETA, "crate::alpha::Thing"), "upward"),
            ("beta.rs", line_of(BETA, "use crate::gamma::One"), "sideways"),
            ("util/mod.rs", line_of(UTIL_MOD, "crate::net::ping"), "upward"),
            ("extra.rs", 1, "unassigned: 'extra' is in no layer of layers.toml"),
        ]))
        self.assertEqual(warnings, [])

    def test_allow_permits_a_peer_import(self):
        cfg = dict(self.cfg, allow=[["beta", "gamma"]])
        found = cl.check_layers(self.crate, cfg, [])
        self.assertFalse([f for f in found if "sideways" in f.message])

    def test_layer_names_that_match_nothing_are_warnings(self):
        cfg = dict(self.cfg, layers=self.cfg["layers"] + [["pipeline"], ["extra"]])
        warnings: list[str] = []
        found = cl.check_layers(self.crate, cfg, warnings)
        self.assertEqual(warnings, ["layers: 'pipeline' (layer 6) names nothing under src"])
        self.assertFalse([f for f in found if "unassigned" in f.message])

    def test_bad_layer_config_is_an_error(self):
        with self.assertRaises(cl.ConfigError):
            cl.check_layers(self.crate, dict(self.cfg, layers=[["a"], ["a"]]), [])

    # --- forbidden words

    def test_forbidden_words_in_code_not_in_comments(self):
        found = cl.check_words(self.crate, self.cfg, [])
        got = sorted((f.file, f.line, f.message.split(" matches ")[0]) for f in found)
        self.assertEqual(got, sorted([
            ("gamma/one.rs", line_of(GAMMA_ONE, "BodyFraming,"),
             "forbidden: use of 'sepia_http1::BodyFraming'"),
            ("gamma/one.rs", line_of(GAMMA_ONE, 'b"HTTP/1.1'), "forbidden: 'HTTP/1.1'"),
            ("gamma/one.rs", line_of(GAMMA_ONE, 'b"HTTP/1.1'), "forbidden: '\\\\r\\\\n'"),
            ("gamma/one.rs", line_of(GAMMA_ONE, "tokio::net::TcpStream"),
             "forbidden: 'TcpStream'"),
            ("gamma/one.rs", line_of(GAMMA_ONE, "sepia_http1::BodyFraming::Chunked"),
             "forbidden: 'sepia_http1::BodyFraming'"),
        ]))
        self.assertTrue(all(f.message.endswith("(h1 stays out)") for f in found))

    def test_forbid_prefix_that_matches_nothing_is_a_warning(self):
        cfg = dict(self.cfg, forbid=[dict(self.cfg["forbid"][0], under=["gamma", "upstream"])])
        warnings: list[str] = []
        cl.check_words(self.crate, cfg, warnings)
        self.assertEqual(warnings, ["words: forbid rule 1: 'upstream' names nothing under src"])

    def test_under_prefixes(self):
        self.assertTrue(cl._under("upstream/h1.rs", "upstream/h1"))
        self.assertTrue(cl._under("upstream/h1/conn.rs", "upstream/h1"))
        self.assertTrue(cl._under("cache.rs", "cache"))
        self.assertFalse(cl._under("cachex.rs", "cache"))
        self.assertFalse(cl._under("upstream/h10.rs", "upstream/h1"))
        self.assertTrue(cl._under("front/h1/x.rs", "*/h1"))

    # --- fn length

    def test_long_functions(self):
        found = cl.check_fn_length(self.crate, 80)
        got = sorted((f.file, f.data["fn"], f.data["lines"]) for f in found)
        self.assertEqual(got, [
            ("beta.rs", "eighty_one", 81),
            ("beta.rs", "fmt_long", 90),
            ("beta.rs", "nested_long", 85),
            ("beta.rs", "outer", 88),  # 85 nested + its own 2 + a blank line
        ])
        fmt_long = next(f for f in found if f.data["fn"] == "fmt_long")
        self.assertEqual(fmt_long.line, line_of(BETA, "fn fmt_long"))

    # --- command line

    def test_cli_all_checks(self):
        rc, out = self.cli()
        self.assertEqual(rc, 1)
        lines = out.splitlines()
        self.assertIn(f"/alpha.rs:{line_of(ALPHA, 'beta::{self')}: cycles: import cycle among"
                      " 2 files: alpha.rs, beta.rs; for example alpha.rs -> beta.rs -> alpha.rs",
                      out)
        self.assertIn(f"    beta.rs:{line_of(BETA, 'crate::alpha::Thing')} -> alpha.rs", lines)
        self.assertTrue(lines[-1].startswith("check_layers: FAIL: 16 finding(s) (3 cycles, "
                                             "4 layers, 5 words, 4 fn-length)"), lines[-1])

    def test_cli_only_and_json(self):
        rc, out = self.cli("--only", "cycles,fn-length", "--json")
        self.assertEqual(rc, 1)
        doc = json.loads(out)
        self.assertEqual(doc["checks"], ["cycles", "fn-length"])
        self.assertEqual(doc["counts"], {"cycles": 3, "fn-length": 4})
        rc, out = self.cli("--only", "fn-length", "--max-fn-lines", "200")
        self.assertEqual((rc, out.splitlines()[-1].split(":")[1].strip()), (0, "ok"))

    def test_cli_bad_usage(self):
        err = io.StringIO()
        old, sys.stderr = sys.stderr, err
        try:
            self.assertEqual(self.cli("--only", "cycles,nope")[0], 2)
            self.assertEqual(cl.run(["--src", os.path.join(self.src, "missing")]), 2)
        finally:
            sys.stderr = old


class Resolution(unittest.TestCase):
    def test_file_then_mod_rs_then_parent_module(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(tmp, {
                "lib.rs": "mod a; mod c; mod e; mod g;\n",
                "a/mod.rs": "mod b;\n",
                "a/b.rs": "pub fn f() {}\n",
                "c/mod.rs": "mod d;\n",
                "c/d/mod.rs": "pub fn f() {}\n",
                "e.rs": "pub fn g() {}\n",
                "g.rs": """
                    use crate::a::b::f;
                    use crate::c::d::f as f2;
                    use crate::e::g as g2;
                    use crate::a::*;
                    use crate::c;
                    pub(in crate::e) fn vis() {}
                    pub fn h() { c::d::f(); $crate::e::g(); }
                """,
            })
            crate = cl.Crate(tmp)
            self.assertEqual(crate.resolve(["a", "b", "f"]), ("a/b.rs", 2))
            self.assertEqual(crate.resolve(["c", "d", "f"]), ("c/d/mod.rs", 2))
            self.assertEqual(crate.resolve(["e", "g"]), ("e.rs", 1))
            self.assertEqual(crate.resolve(["zz"]), ("lib.rs", 0))
            self.assertEqual(crate.edges["g.rs"], {
                "a/b.rs": [1], "c/d/mod.rs": [2, 7], "e.rs": [3], "a/mod.rs": [4],
                "c/mod.rs": [5],
            })


    def test_path_to_a_module_without_a_file_is_a_warning(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(tmp, {
                "lib.rs": "mod a;\npub struct Root;\n",
                "a.rs": "use crate::gone::{f, g};\nuse crate::Root;\n"
                        "fn h() { crate::a::gone::x(); crate::Root::new(); }\n",
            })
            crate = cl.Crate(tmp)
            self.assertEqual(crate.edges["a.rs"], {"lib.rs": [1, 2, 3]})
            self.assertEqual(crate.unresolved, [
                ("a.rs", 1, "crate::gone", "lib.rs"), ("a.rs", 3, "crate::a::gone", "a.rs")])
            out = io.StringIO()
            self.assertEqual(cl.run(["--src", tmp, "--only", "cycles"], stdout=out), 0)
            self.assertIn("/a.rs:1: no file for module crate::gone; counted as an import of "
                          "lib.rs", out.getvalue())


class Lexer(unittest.TestCase):
    def test_views_keep_length_and_lines(self):
        src = 'let s = "a // b"; // c "d"\n/* x\n /* y */ z */ let r = r#"q"#;\n'
        code, nocomment = cl.lex(src)
        self.assertEqual((len(code), len(nocomment)), (len(src), len(src)))
        self.assertEqual(code.count("\n"), src.count("\n"))
        self.assertEqual(code.split("\n")[0].rstrip(), 'let s = "      ";')
        self.assertEqual(nocomment.split("\n")[0].rstrip(), 'let s = "a // b";')
        self.assertEqual(code.split("\n")[2].strip(), 'let r = r#" "#;')

    def test_lifetimes_are_not_char_literals(self):
        src = "fn f<'a>(x: &'a str) -> char { let _ = 'label: loop { break 'label; }; '{' }"
        code, _ = cl.lex(src)
        self.assertEqual(code.count("{"), code.count("}"))
        self.assertIn("&'a str", code)

    def test_escaped_chars_and_byte_strings(self):
        src = r"""let a = '\''; let b = b'"'; let c = "\"{"; let d = br"}"; let e = '\u{7b}'; {}"""
        code, _ = cl.lex(src)
        self.assertEqual((code.count("{"), code.count("}")), (1, 1))

    def test_use_tree_expansion(self):
        code = "use a::{b::{self, C as D}, e::*, f};"
        paths, end = cl.parse_use(code, len("use"))
        self.assertEqual(end, len(code))
        self.assertEqual([(p.text(), p.alias) for p in paths], [
            ("a::b", "b"), ("a::b::C", "D"), ("a::e::*", None), ("a::f", "f")])


class Speed(unittest.TestCase):
    def test_ten_thousand_lines_under_a_second(self):
        with tempfile.TemporaryDirectory() as tmp:
            files = {"lib.rs": "".join(f"mod m{i};\n" for i in range(50))}
            for i in range(50):
                body = "".join(
                    f"use crate::m{(i + k) % 50}::f{k};\n" for k in range(1, 4))
                body += "".join(
                    fn_of(f"f{k}", 60, filler='let _s = "}"; crate::m0::f1(); // {')
                    for k in range(1, 4))
                body += "#[cfg(test)]\nmod tests {\n" + fn_of("t", 20) + "}\n"
                files[f"m{i}.rs"] = body
            write_tree(tmp, files)
            started = time.perf_counter()
            rc = cl.run(["--src", tmp, "--only", "cycles,fn-length,words"],
                        stdout=io.StringIO())
            elapsed = time.perf_counter() - started
            self.assertEqual(rc, 1)  # m0 <-> m1 <-> ... form cycles
            total = sum(t.count("\n") for t in files.values())
            self.assertGreater(total, 9_500)
            self.assertLess(elapsed, 1.0, f"{elapsed:.2f}s for {total} lines")


@unittest.skipUnless(os.path.isdir(os.path.join(REPO, "crates/proxy/src")),
                     "no crates/proxy/src")
class RealCrate(unittest.TestCase):
    """The proxy crate is being restructured, so only the checker's health is asserted."""

    def test_runs_on_the_proxy_crate(self):
        out = io.StringIO()
        started = time.perf_counter()
        rc = cl.run(["--src", os.path.join(REPO, "crates/proxy/src"), "--only",
                     "cycles,fn-length", "--json"], stdout=out)
        self.assertLess(time.perf_counter() - started, 1.0)
        doc = json.loads(out.getvalue())
        self.assertEqual(rc, 1 if doc["findings"] else 0)
        self.assertGreater(doc["files"], 0)


if __name__ == "__main__":
    unittest.main()
