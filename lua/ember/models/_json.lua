-- models/_json.lua (internal): a strict JSON decoder for the small files
-- of a Hugging Face model folder (config.json, model.safetensors.index.json).
-- decode(text) -> value: objects are tables, arrays are lists, null is nil
-- (a missing key, as Lua has no null), integers without a fraction or
-- exponent are Lua integers (so config sizes pass math.type checks), other
-- numbers floats. Malformed text raises "bad JSON at byte N: ...".
-- encode(value) writes one (config.json of Llama:save_pretrained).
local M = {}

local ESCAPES = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

function M.decode(text)
  local pos = 1
  local function fail(msg) error(("bad JSON at byte %d: %s"):format(pos, msg), 0) end
  local function skip() pos = text:find("[^ \t\r\n]", pos) or #text + 1 end
  local value

  local function str()
    pos = pos + 1 -- the opening quote
    local out = {}
    while true do
      local i = text:find('["\\]', pos)
      if not i then fail("unterminated string") end
      out[#out + 1] = text:sub(pos, i - 1)
      pos = i + 1
      if text:sub(i, i) == '"' then break end
      local c = text:sub(pos, pos)
      if c == "u" then
        local hex = text:match("^%x%x%x%x", pos + 1)
        if not hex then fail("bad \\u escape") end
        local cp = tonumber(hex, 16)
        pos = pos + 5
        -- a surrogate pair (characters past U+FFFF)
        local lo = cp >= 0xD800 and cp <= 0xDBFF and text:match("^\\u(%x%x%x%x)", pos)
        if lo then
          cp = 0x10000 + ((cp - 0xD800) << 10) + (tonumber(lo, 16) - 0xDC00)
          pos = pos + 6
        end
        out[#out + 1] = utf8.char(cp)
      elseif ESCAPES[c] then
        out[#out + 1] = ESCAPES[c]
        pos = pos + 1
      else
        fail("bad escape \\" .. c)
      end
    end
    return table.concat(out)
  end

  local function num()
    local s = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
    if not s or not s:match("^-?%d") then fail("bad number") end
    pos = pos + #s
    local v = tonumber(s) -- an integer for "16", a float for "16.0" or "1e-05" (Lua's rule, JSON's text)
    if not v then fail("bad number " .. s) end
    return v
  end

  local function list(close, item)
    pos = pos + 1
    skip()
    if text:sub(pos, pos) == close then
      pos = pos + 1
      return
    end
    while true do
      item()
      skip()
      local c = text:sub(pos, pos)
      pos = pos + 1
      if c == close then return end
      if c ~= "," then fail(("expected ',' or '%s'"):format(close)) end
      skip()
    end
  end

  function value()
    skip()
    local c = text:sub(pos, pos)
    if c == "{" then
      local t = {}
      list("}", function()
        if text:sub(pos, pos) ~= '"' then fail("expected a key") end
        local k = str()
        skip()
        if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value()
      end)
      return t
    elseif c == "[" then
      local t, n = {}, 0
      list("]", function()
        n = n + 1
        t[n] = value()
      end)
      return t
    elseif c == '"' then
      return str()
    elseif c == "-" or c:match("%d") then
      return num()
    end
    for _, w in ipairs { { "true", true }, { "false", false }, { "null", nil } } do
      if text:sub(pos, pos + #w[1] - 1) == w[1] then
        pos = pos + #w[1]
        return w[2]
      end
    end
    fail(c == "" and "unexpected end" or ("unexpected '%s'"):format(c))
  end

  local v = value()
  skip()
  if pos <= #text then fail("text after the value") end
  return v
end

-- The shortest text of a float that reads back as the same number.
local function float_text(x)
  if x ~= x or x == math.huge or x == -math.huge then error("JSON has no NaN or infinity", 2) end
  for digits = 15, 17 do
    local t = ("%." .. digits .. "g"):format(x)
    if tonumber(t) == x then
      if not t:find("[.eEn]") then t = t .. ".0" end -- stays a float when read back
      return t
    end
  end
end

local function quote(str)
  return '"' .. str:gsub('[%c"\\]', function(c)
    local e = ({ ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r" })[c]
    return e or ("\\u%04x"):format(c:byte())
  end) .. '"'
end

-- encode(value [, indent]) -> text: tables with keys 1..n are arrays, other
-- tables objects (keys sorted, as json.dumps(sort_keys=True)); nested
-- values on lines of their own, indented by `indent` spaces (default 2).
function M.encode(v, indent, depth)
  indent, depth = indent or 2, depth or 0
  local t = type(v)
  if t == "boolean" then return tostring(v) end
  if t == "number" then return math.type(v) == "integer" and tostring(v) or float_text(v) end
  if t == "string" then return quote(v) end
  if t ~= "table" then error("JSON cannot hold a " .. t, 2) end
  local pad, inner = ("\n" .. (" "):rep(indent * depth)), ("\n" .. (" "):rep(indent * (depth + 1)))
  local parts = {}
  if #v > 0 or next(v) == nil then
    for i = 1, #v do parts[i] = M.encode(v[i], indent, depth + 1) end
    if #parts == 0 then return "[]" end
    return "[" .. inner .. table.concat(parts, "," .. inner) .. pad .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for i, k in ipairs(keys) do parts[i] = quote(k) .. ": " .. M.encode(v[k], indent, depth + 1) end
  return "{" .. inner .. table.concat(parts, "," .. inner) .. pad .. "}"
end

return M
