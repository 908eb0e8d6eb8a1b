-- Give one concurrency ticket back. KEYS[1]: the gate's hash; ARGV[1]: member; ARGV[2]:
-- ticket. Returns 1 when this call freed the ticket, 0 when it was not held (released
-- twice, expired, or never taken), so a stale release frees nothing of anyone else's.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local exp, rest, found = nil, {}, false
for tok in string.gmatch(v, '%S+') do
  if not exp then
    exp = tok
  elseif tok == ARGV[2] and not found then
    found = true
  else
    rest[#rest + 1] = tok
  end
end
if not found then return 0 end
if #rest == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], exp .. ' ' .. table.concat(rest, ' '))
end
return 1
