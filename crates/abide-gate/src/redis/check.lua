-- One decision over every gate that applies, atomically, in one round trip.
-- Time is the Redis server's (TIME, microseconds), so every instance reads the same clock.
-- KEYS[i]: state of gate i (a hash). ARGV[1]: ticket of this acquisition; then 5 per gate:
--   kind ('g' GCRA, 'f' fixed window, 's' sliding window, 'c' concurrency), a, b, c, member
--   g: a = interval_us, b = tolerance_us, c = limit, member = longest wait_us a request
--      over the rate may be held ('' : refuse it). A held request reserves its slot: TAT
--      moves on (or it takes the earliest hole a waiter gave back, zset KEYS[i]..':h'),
--      and the ticket is recorded with its slot in zset KEYS[i]..':p' for a give-back.
--   f, s: a = window_us, b = limit
--   c: a = lease_us, b = limit, c = retry_hint_us, member = who shares a slot
-- Returns 3 numbers per gate: admitted (1, 2 = held: reset_us is then the wait, 0 =
-- refused), remaining, reset_us. Writes only when every gate admits (expired concurrency
-- slots, passed holes and due reservations are dropped either way).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ticket = ARGV[1]
local function num(x) return string.format('%.17g', x) end
local out, writes, all_ok = {}, {}, true
for i = 1, #KEYS do
  local base = 1 + (i - 1) * 5
  local kind = ARGV[base + 1]
  local a, b, c = tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  local member = ARGV[base + 5]
  local key = KEYS[i]
  local ok, remaining, reset = 0, 0, 0
  if kind == 'g' then
    local tat = tonumber(redis.call('HGET', key, 'tat')) or now
    if tat < now then tat = now end
    local allow_at = tat - b
    local max_wait = tonumber(member)
    if now < allow_at and max_wait then
      local holes, pending = key .. ':h', key .. ':p'
      redis.call('ZREMRANGEBYSCORE', holes, '-inf', '(' .. num(now))
      redis.call('ZREMRANGEBYSCORE', pending, '-inf', num(now))
      local h = redis.call('ZRANGE', holes, 0, 0, 'WITHSCORES')
      local slot, hole = allow_at, nil
      if h[1] then slot, hole = tonumber(h[2]), h[1] end
      if slot - now <= max_wait then
        ok, reset = 2, slot - now
        local new_tat = tat + a
        if hole then new_tat = tat end
        writes[i] = {'d', new_tat, slot, hole}
      else
        reset = allow_at - now
      end
    elseif now < allow_at then
      reset = allow_at - now
    else
      local new_tat = tat + a
      ok, remaining, reset = 1, math.floor((now + b + a - new_tat) / a), new_tat - now
      writes[i] = {'g', new_tat}
    end
  elseif kind == 'f' or kind == 's' then
    local v = redis.call('HMGET', key, 'start', 'prev', 'count')
    local start, prev, count = tonumber(v[1]), tonumber(v[2]) or 0, tonumber(v[3]) or 0
    if not start or now - start >= 2 * a then
      start, prev, count = now, 0, 0
    elseif now - start >= a then
      start, prev, count = start + a, count, 0
    end
    local e = math.max(now - start, 0)
    if kind == 'f' then
      reset = start + a - now
      if count < b then
        ok, count = 1, count + 1
        remaining = b - count
      end
    else
      -- Sliding (rate.rs `sliding_view`): units left reset at the window's end; none left
      -- (refused, or the last one admitted) names the wait until one more fits.
      if prev * (a - e) + (count + 1) * a <= b * a then
        ok, count = 1, count + 1
        remaining = math.floor(math.max(b * a - prev * (a - e) - count * a, 0) / a)
      end
      if remaining > 0 then
        reset = a - e
      elseif count < b then
        reset = (a - e) - math.floor((b - count - 1) * a / prev)
      else
        reset = (a - e) + (a - math.floor((b - 1) * a / count))
      end
    end
    if ok == 1 then writes[i] = {'w', start, prev, count} end
  elseif kind == 'c' then
    local all = redis.call('HGETALL', key)
    local used, soonest, mine = 0, nil, nil
    for j = 1, #all, 2 do
      local exp = tonumber(string.match(all[j + 1], '^(%S+)'))
      if exp <= now then
        redis.call('HDEL', key, all[j])
      else
        used = used + 1
        if all[j] == member then mine = all[j + 1] end
        if not soonest or exp - now < soonest then soonest = exp - now end
      end
    end
    if mine or used < b then
      ok = 1
      remaining = b - used - (mine and 0 or 1)
      writes[i] = {'c', member, mine}
    else
      reset = c
      if soonest and soonest < c then reset = soonest end
    end
  end
  if ok == 0 then all_ok = false end
  out[#out + 1] = ok
  out[#out + 1] = remaining
  out[#out + 1] = reset
end
if all_ok then
  for i = 1, #KEYS do
    local w, key = writes[i], KEYS[i]
    local a = tonumber(ARGV[1 + (i - 1) * 5 + 2])
    if w[1] == 'g' then
      redis.call('HSET', key, 'tat', num(w[2]))
      redis.call('PEXPIRE', key, math.ceil((w[2] - now) / 1000) + 1000)
    elseif w[1] == 'd' then
      local ttl = math.ceil((w[2] - now) / 1000) + 1000
      redis.call('HSET', key, 'tat', num(w[2]))
      redis.call('PEXPIRE', key, ttl)
      if w[4] then redis.call('ZREM', key .. ':h', w[4]) end
      redis.call('ZADD', key .. ':p', num(w[3]), ticket)
      redis.call('PEXPIRE', key .. ':p', ttl)
    elseif w[1] == 'w' then
      redis.call('HSET', key, 'start', num(w[2]), 'prev', num(w[3]), 'count', num(w[4]))
      redis.call('PEXPIRE', key, math.ceil(2 * a / 1000) + 1000)
    else
      local tickets = ''
      if w[3] then tickets = string.match(w[3], '^%S+(.*)$') end
      redis.call('HSET', key, w[2], num(now + a) .. tickets .. ' ' .. ticket)
      redis.call('PEXPIRE', key, math.ceil(a / 1000) + 1000)
    end
  end
end
return out
