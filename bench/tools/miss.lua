-- wrk script for the miss case: every request asks for a URL nobody asked for before,
-- /u/<prefix>-<counter>. The prefix (first argument after --) makes runs distinct, so a
-- later repetition never hits what an earlier one stored.
local prefix = "x"
local counter = 0

function init(args)
  prefix = args[1] or tostring(os.time())
end

function request()
  counter = counter + 1
  return wrk.format("GET", "/u/" .. prefix .. "-" .. counter)
end
