// Scores one run of http-cache-tests and compares it with the committed baseline.
//
// The suite's CLI prints a JSON object: test id -> true (pass) or [error kind, message]. It
// does not say which tests are `required`, `optimal` or `check`; that lives in the test
// definitions, so this script imports them from the installed package and scores by kind.
//
// Scoring follows cache-tests.fyi: the scored suite is tests/index.mjs (the 23 families the
// published peer numbers use), minus `browser_only` tests, which the CLI never runs. A test
// counts as passed only when its result is exactly `true`; setup failures, retries and
// assertion failures all count as not passed. The Surrogate-Control family, which the CLI
// also runs, is a CDN extension outside RFC 9111 and is reported separately, never gated.
//
// Usage:
//   node summarise.mjs --results RAW.json --out last-results.json --baseline baseline.json
//                      [--update-baseline]
//       prints the score line and failing required/optimal ids, writes the detailed results,
//       exits 1 when required or optimal is below the baseline (3 on bad input).
//   node summarise.mjs --markdown last-results.json
//       prints the "Failing tests" section of docs/CONFORMANCE.md from a results file.

import fs from 'node:fs'
import process from 'node:process'

import scoredFamilies from './node_modules/http-cache-tests/tests/index.mjs'
import surrogateFamily from './node_modules/http-cache-tests/tests/surrogate-control.mjs'

const SUITE_VERSION = '0.4.5'
const KINDS = ['required', 'optimal', 'check']
const GATED = ['required', 'optimal']

function fail (message) {
  console.error(`summarise: ${message}`)
  process.exit(3)
}

function parseArgs (argv) {
  const args = { updateBaseline: false }
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    if (flag === '--update-baseline') {
      args.updateBaseline = true
    } else if (['--results', '--out', '--baseline', '--markdown'].includes(flag)) {
      if (i + 1 >= argv.length) fail(`${flag} needs a value`)
      args[flag.slice(2)] = argv[++i]
    } else {
      fail(`unknown argument ${flag}`)
    }
  }
  return args
}

function checkSuiteVersion () {
  const url = new URL('./node_modules/http-cache-tests/package.json', import.meta.url)
  const { version } = JSON.parse(fs.readFileSync(url, 'utf8'))
  if (version !== SUITE_VERSION) {
    fail(`http-cache-tests ${version} is installed, the baseline is for ${SUITE_VERSION}`)
  }
}

/** Every test the CLI runs outside a browser, with its family and kind. */
function testsOf (families) {
  const out = []
  for (const family of families) {
    for (const test of family.tests) {
      if (test.browser_only === true) continue
      out.push({
        id: test.id,
        kind: test.kind ?? 'required',
        family: family.id,
        familyName: family.name,
        name: test.name,
        dependsOn: test.depends_on ?? []
      })
    }
  }
  return out
}

/** Scores `tests` against the raw results: counts per kind and the tests that did not pass. */
function score (tests, raw) {
  const counts = Object.fromEntries(KINDS.map(k => [k, { passed: 0, total: 0 }]))
  const failing = Object.fromEntries(KINDS.map(k => [k, []]))
  for (const test of tests) {
    if (!(test.kind in counts)) fail(`test ${test.id} has unknown kind ${test.kind}`)
    const result = raw[test.id]
    counts[test.kind].total++
    if (result === true) {
      counts[test.kind].passed++
    } else {
      const [error, message] = Array.isArray(result) ? result : ['Missing', 'no result reported']
      failing[test.kind].push({ ...test, error, message, verdict: verdictOf(test, error, raw) })
    }
  }
  return { counts, failing }
}

/**
 * How the suite's own report (lib/display.mjs, determineTestResult) classifies a test that did
 * not pass: a test whose dependency check did not pass is "dependency-failed", one that failed
 * while setting up is "setup-failed"; only the rest are failures of the cache under test.
 */
function verdictOf (test, error, raw) {
  if (test.dependsOn.some(dep => raw[dep] !== true)) return 'dependency-failed'
  if (error === 'Setup') return 'setup-failed'
  return 'failed'
}

/** One line per gated kind: passed, and the non-passing tests by the suite's verdict. */
function verdictLine (kind, counts, failing) {
  const by = { failed: 0, 'setup-failed': 0, 'dependency-failed': 0 }
  for (const t of failing[kind]) by[t.verdict]++
  return `${kind} as the suite reports it: ${counts[kind].passed} passed, ${by.failed} failed, ` +
    `${by['setup-failed']} setup-failed, ${by['dependency-failed']} dependency-failed (of ${counts[kind].total})`
}

function scoreLine (counts) {
  return KINDS.map(k => `${k} ${counts[k].passed}/${counts[k].total}`).join(', ')
}

function readJson (path, what) {
  let text
  try {
    text = fs.readFileSync(path, 'utf8')
  } catch (err) {
    fail(`cannot read ${what} ${path}: ${err.message}`)
  }
  try {
    return JSON.parse(text)
  } catch (err) {
    fail(`${what} ${path} is not JSON (${err.message}); first bytes: ${text.slice(0, 200)}`)
  }
}

function summarise (args) {
  for (const flag of ['results', 'out', 'baseline']) {
    if (!args[flag]) fail(`--${flag} is required`)
  }
  checkSuiteVersion()
  const raw = readJson(args.results, 'suite output')
  const main = score(testsOf(scoredFamilies), raw)
  const surrogate = score(testsOf([surrogateFamily]), raw)

  const report = {
    suite: `http-cache-tests@${SUITE_VERSION}`,
    finished: new Date().toISOString(),
    counts: Object.fromEntries(KINDS.map(k => [k, main.counts[k].passed])),
    totals: Object.fromEntries(KINDS.map(k => [k, main.counts[k].total])),
    surrogate_control: Object.fromEntries(
      KINDS.map(k => [k, `${surrogate.counts[k].passed}/${surrogate.counts[k].total}`])),
    failing: main.failing
  }
  fs.writeFileSync(args.out, JSON.stringify(report, null, 2) + '\n')

  console.log(scoreLine(main.counts))
  for (const kind of GATED) console.log(verdictLine(kind, main.counts, main.failing))
  console.log(`(surrogate-control, not scored: ${scoreLine(surrogate.counts)})`)
  for (const kind of GATED) {
    const ids = main.failing[kind].map(t => t.id)
    console.log(`failing ${kind} (${ids.length}): ${ids.join(' ')}`)
  }

  // --update-baseline may create the first baseline; otherwise a missing one is an error.
  const baseline = args.updateBaseline && !fs.existsSync(args.baseline)
    ? { required: 0, optimal: 0, check: 0 }
    : readJson(args.baseline, 'baseline')
  for (const kind of KINDS) {
    if (!Number.isInteger(baseline[kind])) fail(`baseline ${args.baseline} lacks an integer "${kind}"`)
  }
  let regressed = false
  for (const kind of KINDS) {
    const now = report.counts[kind]
    const then = baseline[kind]
    if (now < then) {
      const gated = GATED.includes(kind)
      regressed ||= gated
      console.log(`${gated ? 'REGRESSION' : 'note'}: ${kind} ${now} < baseline ${then}`)
    } else if (now > then) {
      console.log(`improved: ${kind} ${now} > baseline ${then}` +
        (args.updateBaseline ? '' : ' (run with --update-baseline to raise it)'))
    }
  }
  if (args.updateBaseline) {
    const raised = Object.fromEntries(KINDS.map(k => [k, Math.max(baseline[k], report.counts[k])]))
    fs.writeFileSync(args.baseline, JSON.stringify(raised, null, 2) + '\n')
    console.log(`baseline now ${JSON.stringify(raised)}`)
  }
  process.exit(regressed ? 1 : 0)
}

/** The "Failing tests" section of docs/CONFORMANCE.md, grouped by family in suite order. */
function markdown (path) {
  const report = readJson(path, 'results file')
  const lines = []
  for (const kind of GATED) {
    const failing = report.failing[kind]
    lines.push(`### ${kind} (${failing.length} failing)`, '')
    const byFamily = new Map()
    for (const test of failing) {
      if (!byFamily.has(test.familyName)) byFamily.set(test.familyName, [])
      byFamily.get(test.familyName).push(test)
    }
    for (const [familyName, tests] of byFamily) {
      lines.push(`**${familyName}**`, '')
      for (const test of tests) {
        const verdict = test.verdict && test.verdict !== 'failed' ? ` *(${test.verdict})*` : ''
        lines.push(`- \`${test.id}\`${verdict}: ${test.name.replace(/\s+/g, ' ').trim()}`)
      }
      lines.push('')
    }
  }
  process.stdout.write(lines.join('\n'))
}

const args = parseArgs(process.argv.slice(2))
if (args.markdown) {
  markdown(args.markdown)
} else {
  summarise(args)
}
