-- wrk script for the miss cases: every request asks for a URL nobody asked for before,
-- <base><prefix>-<counter>. Arguments after --: the prefix (makes runs distinct, so a later
-- repetition never hits what an earlier one stored), the base path (default /u/; /v/ answers
-- with Vary). No response() callback: it would cost wrk a Lua call per response.
local prefix, base = "x", "/u/"
local counter = 0

function init(args)
  prefix = args[1] or tostring(os.time())
  base = args[2] or base
end

function request()
  counter = counter + 1
  return wrk.format("GET", base .. prefix .. "-" .. counter)
end

