--- ember.data.text: UTF-8 helpers for tokenizers and readers.
--
-- Lua's string.lower only knows ASCII. The word lists carry Latin-1 and
-- Latin Extended-A capitals (É, Ä, Ñ, Œ, ...), so lower() maps those too:
-- enough for English, French, German, Spanish and Italian (ß has no
-- single-letter capital and stays as it is).
-- @module data.text
local error = require("ember._errors").error -- raises at the user's line
local M = {}

-- The lower-case code point of one capital letter, or the code point itself.
local function lower_cp(c)
  if c < 0x80 then
    if c >= 0x41 and c <= 0x5A then return c + 32 end
    return c
  end
  if c >= 0xC0 and c <= 0xDE and c ~= 0xD7 then return c + 32 end -- À..Þ except ×
  if c >= 0x100 and c <= 0x137 then return c | 1 end                -- Ā..ķ: pairs even/odd
  if c >= 0x139 and c <= 0x148 and c % 2 == 1 then return c + 1 end -- Ĺ..ň: pairs odd/even
  if c >= 0x14A and c <= 0x177 then return c | 1 end                -- Ŋ..ŷ (Œ→œ)
  if c == 0x178 then return 0xFF end                               -- Ÿ → ÿ
  if c >= 0x179 and c <= 0x17E and c % 2 == 1 then return c + 1 end -- Ź..ž
  if c >= 0x391 and c <= 0x3AB and c ~= 0x3A2 then return c + 32 end -- Greek capitals
  if c >= 0x410 and c <= 0x42F then return c + 32 end              -- Cyrillic А..Я
  if c >= 0x400 and c <= 0x40F then return c + 80 end              -- Cyrillic Ѐ..Џ
  return c
end
M.lower_codepoint = lower_cp

-- Two-byte UTF-8 capitals -> their lower-case bytes, for gsub. Every
-- letter lower_cp changes lies below U+0800, so two bytes cover them all.
local LOWER2 = {}
for c = 0x80, 0x7FF do
  local l = lower_cp(c)
  if l ~= c then LOWER2[utf8.char(c)] = utf8.char(l) end
end

--- Lower-cases a UTF-8 string. Invalid UTF-8 is an error naming the string.
function M.lower(s)
  s = s:lower() -- ASCII letters (bytes >= 0x80 are left alone in the C locale)
  if not s:find("[\128-\255]") then return s end
  if not utf8.len(s) then error(("text.lower: invalid UTF-8 in %q"):format(s), 2) end
  return (s:gsub("[\192-\223][\128-\191]", LOWER2))
end

--- The characters (UTF-8 sequences) of s as a list of strings.
function M.chars(s)
  local out = {}
  if not s:find("[\128-\255]") then
    for i = 1, #s do out[i] = s:sub(i, i) end
    return out
  end
  if not utf8.len(s) then error(("text.chars: invalid UTF-8 in %q"):format(s), 2) end
  for _, c in utf8.codes(s) do out[#out + 1] = utf8.char(c) end
  return out
end

--- The texts a tokenizer's fit reads: a list of strings, or one string as
-- a list of one (ipairs over a bare string saw no text: an empty
-- vocabulary). Anything else is an error naming `who`.
function M.texts(who, texts)
  if type(texts) == "string" then return {texts} end
  if type(texts) ~= "table" then
    error(("%s: texts must be a list of strings (or one string), got %s"):format(who, type(texts)), 2)
  end
  for i, s in ipairs(texts) do
    if type(s) ~= "string" then error(("%s: text %d is a %s, not a string"):format(who, i, type(s)), 2) end
  end
  return texts
end

--- Number of characters of a UTF-8 string (nil when it is not valid UTF-8).
function M.length(s)
  return utf8.len(s)
end

--- Whitespace-separated words; with split_punct, each punctuation mark
-- becomes a word of its own ("Amen." -> "Amen", ".").
function M.words(s, split_punct)
  local out = {}
  for w in s:gmatch("%S+") do
    if split_punct then
      local pos = 1
      while pos <= #w do
        local a, b = w:find("^[^%p]+", pos)
        if a then
          out[#out + 1] = w:sub(a, b)
          pos = b + 1
        else
          out[#out + 1] = w:sub(pos, pos)
          pos = pos + 1
        end
      end
    else
      out[#out + 1] = w
    end
  end
  return out
end

return M
