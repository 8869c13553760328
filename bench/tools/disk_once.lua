-- wrk script for bench/disk.sh cold: every object at most once, in an order scattered over
-- the disk, so that with the page cache dropped every hit reads the device (the uniform
-- script re-reads objects whose pages the first reads brought in). Request k of thread t
-- (of T) asks for object ((t-1) + k*T) * 7919 mod N; 7919 is a prime that must not divide N.
-- After N requests in all it wraps (then hits come from the page cache: size N above
-- rate x duration). Arguments after --: BASE N THREADS
local base, total, nthreads = "/s/64k/x-", 1000, 1
local counter = 1
function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end
local k = 0
function init(args)
  base = args[1] or base
  total = tonumber(args[2] or total)
  nthreads = tonumber(args[3] or nthreads)
  assert(total % 7919 ~= 0, "N must not be a multiple of 7919")
end
function request()
  local i = ((id - 1) + k * nthreads) % total
  k = k + 1
  return wrk.format("GET", base .. ((i * 7919) % total))
end
