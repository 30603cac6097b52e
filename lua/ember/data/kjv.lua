--- ember.data.kjv: the King James Bible as plain text.
--
-- Debian's bible-kjv-text holds the text in a compressed form
-- (/usr/lib/bible.data); bible-kjv's `bible` program prints it. With -f
-- (formatting off) each verse is one line "Ge1:1 In the beginning ...";
-- the reference is cut, leaving one verse per line.
-- @module data.kjv
local error = require("ember._errors").error -- raises at the user's line
local source = require "ember.data.source"

local M = {}

M.DATA = "/usr/lib/bible.data"
M.PROGRAM = "/usr/bin/bible"

--- The whole text (about 4.3 MB of ASCII), verses separated by "\n".
function M.text()
  local data = os.getenv("EMBER_KJV_DATA") or M.DATA
  source.require_file("kjv", data, "bible-kjv-text")
  local prog = os.getenv("EMBER_KJV_PROGRAM") or M.PROGRAM
  source.require_file("kjv", prog, "bible-kjv")
  local dir, name = data:match("^(.*)/([^/]+)$")
  local raw = source.command_output("kjv", {prog, "-f", "-p", dir, "-d", name, "Gen1:1-Rev22:21"})
  local verses = {}
  for line in raw:gmatch("[^\n]+") do
    local verse = line:match("^%S+%d+:%d+ (.*)$")
    if verse then verses[#verses + 1] = verse end
  end
  if #verses < 31000 then
    error(("kjv: %s printed %d verses, expected 31102"):format(prog, #verses), 0)
  end
  return table.concat(verses, "\n") .. "\n"
end

--- The first `train_frac` of the text and the rest (split by characters).
function M.split(s, train_frac)
  local cut = math.floor(#s * (train_frac or 0.9))
  return s:sub(1, cut), s:sub(cut + 1)
end

return M
