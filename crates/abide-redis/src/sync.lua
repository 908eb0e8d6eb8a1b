-- One node's exchange with the state shared by every node sending to one provider key:
-- heartbeat, publish (pause, decrease, budget deposits and refunds), and take (send slots,
-- retry tokens, the shared view). Atomic, one round trip. Time is the Redis server's.
--
-- KEYS[1] state hash  KEYS[2] nodes zset (member = node, score = heartbeat expiry, us)
-- KEYS[3] node info hash (node -> "mode share")
-- ARGV: 1 node  2 heartbeat ttl ms  3 rate (/s)  4 burst  5 slots wanted
--       6 pause for (us, 0 = none)  7 decreased (0/1)  8 its rate  9 its ceiling ('' none)
--       10 deposits  11 refunds  12 tokens wanted  13 retry ratio  14 floor (/s)
--       15 token cap  16 initial tokens  17 current ceiling ('' none)  18 node info
--       19 horizon (us): no slot further out than this  20 the decreases this node has
--       seen  21 its rate when neither it nor any node has learned one  22 slots this
--       node handed out on its own while Redis was away, still ahead: taken off the
--       schedule so that rejoining adds no burst  23 the live nodes this node last saw
--       if it had joined before (0 on a cold start)  24 rejoin grace (us)  25 shared
--       slots this node still holds from before: charged only to a lost (fresh) state
--       26 '1' to get the live nodes listed (for status displays, about once a second)
--
-- Reply: nodes, pause left (us), decreases, last decrease's rate and ceiling, current
-- rate and ceiling, slots granted ever, retry tokens granted, fresh (0/1), slots (us from
-- now), and { node that set the pause ('' unknown), then with ARGV 26 up to 32 times:
-- node, time since its heartbeat (us), its info }.
--
-- A lost state (a Redis restart, with this node joined before) gives no credit: the
-- schedule starts as an empty bucket (TAT = now + tolerance), the slots the node still
-- holds are charged to it, and until the nodes last seen are back (at most the grace) the
-- schedule runs at the rejoined nodes' share only, since the others still send their
-- fallback share unseen.
-- The rate of the schedule is the last one a node learned from answers ('rate'): a node
-- that has had none ('' in ARGV[3]) or has not yet taken the latest decrease does not set it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])

redis.call('ZADD', KEYS[2], string.format('%.0f', now + ttl * 1000), ARGV[1])
-- Expired nodes leave the set and their info with them (bounded per call).
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now),
  'LIMIT', 0, 64)
if #dead > 0 then redis.call('HDEL', KEYS[3], unpack(dead)) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now))
redis.call('PEXPIRE', KEYS[2], ttl * 4)
local nodes = redis.call('ZCARD', KEYS[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[18])
redis.call('PEXPIRE', KEYS[3], ttl * 4)

local st = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'dseq', 'drate', 'dceil', 'rate',
  'ceil', 'total', 'tokens', 'tokens_at', 'expect', 'expect_until', 'pause_by')
local fresh = 0
if not st[1] then fresh = 1 end
local tat = tonumber(st[1]) or now
local pause = tonumber(st[2]) or 0
local dseq = tonumber(st[3]) or 0
local drate = st[4] or ''
local dceil = st[5] or ''
local cur_rate = st[6] or ''
local cur_ceil = st[7] or ''
local total = tonumber(st[8]) or 0
local expect = tonumber(st[11]) or 0
local expect_until = tonumber(st[12]) or 0
local pause_by = st[13] or ''
local seen_nodes = tonumber(ARGV[23])
local restart = fresh == 1 and seen_nodes > 0
if restart and seen_nodes > 1 then
  expect = seen_nodes
  expect_until = now + tonumber(ARGV[24])
end
-- Nodes expected back from fallback, still sending their share unseen.
local scale = 1
if now < expect_until and nodes < expect then scale = expect / nodes end

-- The host pause: only ever extends.
local pause_for = tonumber(ARGV[6])
if pause_for > 0 and now + pause_for > pause then
  pause = now + pause_for
  pause_by = ARGV[1]
end

-- A decrease this node made: every node adopts it.
if ARGV[7] == '1' then
  dseq = dseq + 1
  drate = ARGV[8]
  dceil = ARGV[9]
end

local mine = tonumber(ARGV[3])
local rate
if ARGV[7] == '1' then
  rate = tonumber(ARGV[8])
elseif mine and tonumber(ARGV[20]) >= dseq then
  rate = mine
end
local written = rate
rate = rate or tonumber(cur_rate) or tonumber(ARGV[21])

-- GCRA (ITU-T I.371 virtual scheduling) over the shared TAT, never into the pause.
local interval = 1000000 / rate
local tol = interval * (tonumber(ARGV[4]) - 1)
local step = interval * scale
local horizon = now + tonumber(ARGV[19])
if restart then tat = now + tol end
local debt = tonumber(ARGV[22])
if fresh == 1 then debt = debt + tonumber(ARGV[25]) end
for _ = 1, debt do
  tat = math.max(tat, now, tat - tol, pause) + step
end
local slots = {}
for _ = 1, tonumber(ARGV[5]) do
  local at = math.max(now, tat - tol, pause)
  if at > horizon then break end
  tat = math.max(tat, at) + step
  slots[#slots + 1] = math.floor(at - now)
end
total = total + #slots

-- Retry budget: tokens refilled at the floor, earned by first attempts (ratio each), given
-- back by refunds, never above the cap.
local cap = tonumber(ARGV[15])
local tokens = tonumber(st[9]) or tonumber(ARGV[16])
local tokens_at = tonumber(st[10]) or now
tokens = tokens + tonumber(ARGV[14]) * math.max(0, now - tokens_at) / 1000000
tokens = tokens + tonumber(ARGV[13]) * tonumber(ARGV[10]) + tonumber(ARGV[11])
tokens = math.min(cap, tokens)
local granted = math.max(0, math.min(tonumber(ARGV[12]), math.floor(tokens)))
tokens = tokens - granted

-- Microsecond times need 16 digits: tostring keeps 14.
local function int(x) return string.format('%.0f', x) end
redis.call('HSET', KEYS[1], 'tat', int(tat), 'pause', int(pause), 'dseq', int(dseq),
  'drate', drate, 'dceil', dceil, 'total', int(total),
  'tokens', string.format('%.6f', tokens), 'tokens_at', int(now), 'expect', int(expect),
  'expect_until', int(expect_until), 'pause_by', pause_by)
if written then
  redis.call('HSET', KEYS[1], 'rate', tostring(written), 'ceil', ARGV[17])
end
redis.call('PEXPIRE', KEYS[1], 3600000)

if scale > 1 then nodes = expect end
local seen = {pause_by}
if ARGV[26] == '1' then
  local live = redis.call('ZRANGE', KEYS[2], 0, 31, 'WITHSCORES')
  for i = 1, #live, 2 do
    seen[#seen + 1] = live[i]
    seen[#seen + 1] = int(math.max(0, now - (tonumber(live[i + 1]) - ttl * 1000)))
    seen[#seen + 1] = redis.call('HGET', KEYS[3], live[i]) or ''
  end
end
return {nodes, math.floor(math.max(0, pause - now)), dseq, drate, dceil, cur_rate, cur_ceil,
  total, granted, fresh, slots, seen}
