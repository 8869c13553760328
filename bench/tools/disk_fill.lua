-- wrk script for bench/disk.sh: requests BASE0 .. BASE(N-1) each twice, the second time about
-- 2*GAP requests later on the same thread (after the first was answered and stored, while it
-- is still in memory: a hit in memory earns the object its disk place when it is evicted).
-- Thread t of T takes the indexes t-1, t-1+T, ...  When a thread is done it stops and writes
-- the file DONE-<t> (wrk itself runs its whole -d; disk.sh sends it SIGINT once all are done).
-- Arguments after --: BASE N THREADS DONE [GAP=200]
local base, total, nthreads, done, gap = "/t/x-", 1000, 1, nil, 200
local counter = 1
function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end
local quota, n, m, step, marked = 0, 0, 0, 0, false
function init(args)
  base = args[1] or base
  total = tonumber(args[2] or total)
  nthreads = tonumber(args[3] or nthreads)
  done = args[4]
  gap = tonumber(args[5] or gap)
  quota = math.floor((total - id + nthreads) / nthreads)
  if quota < 0 then quota = 0 end
end
local function path(k)
  return base .. ((k - 1) * nthreads + (id - 1))
end
function request()
  step = step + 1
  if step % 2 == 1 and n < quota then
    n = n + 1
    return wrk.format("GET", path(n))
  end
  if m < n and (m + gap < n or n >= quota) then
    m = m + 1
    return wrk.format("GET", path(m))
  end
  if n < quota then
    n = n + 1
    return wrk.format("GET", path(n))
  end
  return wrk.format("GET", path(math.max(m, 1)))
end
function response(status, headers, body)
  if m >= quota and not marked then
    marked = true
    if done then
      local f = io.open(done .. "-" .. id, "w")
      if f then f:write(n, "\n"); f:close() end
    end
    wrk.thread:stop()
  end
end
