-- wrk script for bench/disk.sh: uniform random requests over BASE0 .. BASE(N-1).
-- Arguments after --: BASE N
local base, total = "/s/4k/x-", 1000
local counter = 1
function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end
function init(args)
  base = args[1] or base
  total = tonumber(args[2] or total)
  math.randomseed(os.time() * 100 + id)
end
function request()
  return wrk.format("GET", base .. math.random(0, total - 1))
end
