// The suite's test origin, bound to loopback only.
//
// http-cache-tests ships server/server.mjs, which listens on every interface, takes its port
// from npm_config_* variables and writes a pid file into the working directory. This file
// serves the very same request handlers (imported unchanged from the package) with the same
// dispatch on the first path segment, but listens on 127.0.0.1 only and prints the bound port,
// so run.sh can pass port 0 and never race another process for a "free" port.
//
// Usage: node origin.mjs PORT   (0 = any free port; prints "listening 127.0.0.1:<port>")
// The working directory must be the package directory (the file handler serves from cwd).

import http from 'node:http'
import process from 'node:process'

import handleConfig from './node_modules/http-cache-tests/server/handle-config.mjs'
import handleFile from './node_modules/http-cache-tests/server/handle-file.mjs'
import handleState from './node_modules/http-cache-tests/server/handle-state.mjs'
import handleTest from './node_modules/http-cache-tests/server/handle-test.mjs'

const port = Number.parseInt(process.argv[2] ?? '0', 10)
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`origin.mjs: bad port ${process.argv[2]}`)
  process.exit(2)
}

const server = http.createServer((request, response) => {
  const url = new URL(request.url, 'http://127.0.0.1/')
  const pathSegs = url.pathname.split('/')
  pathSegs.shift()
  const dispatch = pathSegs.shift()
  if (dispatch === 'config') {
    handleConfig(pathSegs, request, response)
  } else if (dispatch === 'test') {
    handleTest(pathSegs, request, response)
  } else if (dispatch === 'state') {
    handleState(pathSegs, request, response)
  } else {
    handleFile(url, request, response)
  }
})

server.on('error', err => {
  console.error(`origin.mjs: ${err.message}`)
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => {
  console.log(`listening 127.0.0.1:${server.address().port}`)
})

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => process.exit(0))
}
