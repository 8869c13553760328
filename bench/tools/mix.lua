-- wrk script for the 50 %-hit mix: requests alternate between a new URL (a miss,
-- /u/<prefix>-<counter>) and one of 100 hot URLs (/u/hot-<k>: misses the first time, hits
-- after that as long as the cache keeps its frequently used objects).
local prefix = "x"
local counter = 0

function init(args)
  prefix = args[1] or tostring(os.time())
end

function request()
  counter = counter + 1
  if counter % 2 == 0 then
    return wrk.format("GET", "/u/hot-" .. (counter / 2) % 100)
  end
  return wrk.format("GET", "/u/" .. prefix .. "-" .. counter)
end
