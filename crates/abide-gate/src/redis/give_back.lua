-- A held request went away (ARGV[4] = '1') or was served ('0'): take its reservation out.
-- KEYS[1]: the GCRA gate's hash; ARGV[1]: ticket, ARGV[2]: interval_us, ARGV[3]:
-- tolerance_us. A slot still ahead is given back: the last one reserved by moving TAT back
-- one interval (and any holes then at the end with it), another one as a hole the next
-- request takes. Returns 1 when this call took the reservation out, 0 when it was not
-- there (given back twice, served, or due already), so a stale give-back frees nothing.
local key, ticket = KEYS[1], ARGV[1]
local a, b = tonumber(ARGV[2]), tonumber(ARGV[3])
local holes, pending = key .. ':h', key .. ':p'
local slot = tonumber(redis.call('ZSCORE', pending, ticket))
if not slot then return 0 end
redis.call('ZREM', pending, ticket)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[4] ~= '1' or slot <= now then return 1 end
local function num(x) return string.format('%.17g', x) end
local tat = tonumber(redis.call('HGET', key, 'tat'))
-- Slots are sums of float intervals: equal within half a microsecond.
if tat and math.abs(tat - a - b - slot) < 0.5 then
  tat = tat - a
  while true do
    local last = tat - a - b
    local h = redis.call('ZRANGEBYSCORE', holes, num(last - 0.5), num(last + 0.5), 'LIMIT', 0, 1)
    if not h[1] then break end
    redis.call('ZREM', holes, h[1])
    tat = tat - a
  end
  redis.call('HSET', key, 'tat', num(tat))
else
  redis.call('ZADD', holes, num(slot), num(slot))
  redis.call('PEXPIRE', holes, math.ceil((slot - now) / 1000) + 1000)
end
return 1
