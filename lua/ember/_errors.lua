-- ember/_errors.lua: errors at the user's line.
--
-- An error raised inside ember's Lua code should name the line of the
-- user's code that called into ember, however many library frames (class
-- constructors, module __call, wrappers) lie between. The fixed levels of
-- error(msg, 2) break as soon as a call goes through one more frame, so
-- library files use this instead (the example runs outside the library,
-- so its own lines are the user's):
--
--   local errors = require "ember._errors"
--   -- errors.error(msg [, level]): raises msg at the first frame outside ember's
--   -- Lua files (library files: local error = errors.error); level 0 keeps msg
--   -- without a position (command-line messages)
--   print(pcall(errors.error, "no such option --foo", 0))   --> false no such option --foo
--   -- errors.raise(fmt, ...): error(fmt:format(...)) at the user's line; a library
--   -- position that a passed-on message starts with is dropped
--   print(pcall(errors.raise, "k must be positive, got %d", -2))   --> false ...: k must be positive, got -2
--   -- errors.shape_str(t): a shape as messages write it
--   print(errors.shape_str(ember.zeros(2, 3)), errors.shape_str(ember.tensor(1)))   --> [2, 3] []
--   -- errors.wrap(fn): fn whose errors (also those of C functions it calls,
--   -- which name the library line) move to the user's line; errors.wrap(forward, true)
--   -- for a module's forward also names it in the errors of the nn.functional
--   -- function it calls ("nn.functional.unfold: ..." -> "Unfold.forward: ...")
--   local view5 = errors.wrap(function(t) return t:view(5) end)
--   print(pcall(view5, ember.zeros(2, 3)))          --> false ...: ember.view: shape [5] is invalid ... [2, 3] ...
local M = {}

-- The folder of ember's Lua files ("@/path/to/lua/ember/"), from this file's source.
local SOURCE = debug.getinfo(1, "S").source
local PREFIX = SOURCE:match("^(@.*[/\\])_errors%.lua$") or SOURCE

local function in_library(source)
  return source:sub(1, #PREFIX) == PREFIX
end

-- The stack level (as error() counts from its caller's caller) of the first
-- Lua function outside the library; C frames are skipped.
local function user_level()
  local level = 3 -- 1: user_level, 2: M.error, 3: the function that raised
  while true do
    local info = debug.getinfo(level, "S")
    if not info then return 1 end
    if info.what ~= "C" and not in_library(info.source) then return level - 1 end
    level = level + 1
  end
end

function M.error(msg, level)
  if level == 0 or type(msg) ~= "string" then error(msg, 0) end
  -- a message passed on from a library call (errors.raise("%s", err)) keeps
  -- its text, not the library's position: the user's line goes in front
  error(M.strip_library_position(msg), user_level())
end

--- A tensor's shape as messages write it: "[2, 3]" ("[]" for a 0-d tensor).
function M.shape_str(t) return "[" .. table.concat(t.shape, ", ") .. "]" end

function M.raise(fmt, ...)
  if select("#", ...) > 0 then fmt = fmt:format(...) end
  M.error(fmt)
end

--- Arguments past a function's own are an error naming it, in C's words
-- (core/lua/l_util.c's lember_noextra): they were dropped without a word
-- (F.relu6(x, 5), nn.Tanh(true)). `names` are the arguments it takes after
-- its first `first - 1` ones (the tensor: first = 2; a constructor's: first = 1);
-- `...` the arguments given there. Trailing nils do not count (Lua code
-- forwards optional arguments as nil).
-- @string who "ember.relu6", "nn.TransformerEncoder", ...
-- @tparam {string,...} names
-- @int first the argument number of the first of `...`
function M.no_extra(who, names, first, ...)
  local n = select("#", ...)
  while n > #names and select(n, ...) == nil do n = n - 1 end
  if n <= #names then return end
  local besides = first == 1 and "" or first == 2 and " besides the tensor" or (" besides the %d tensors"):format(first - 1)
  local at, kind = first + #names, type((select(#names + 1, ...)))
  M.error(require("ember.core")._noextra_message(who, besides, #names, #names > 0 and table.concat(names, ", ") or nil,
    n, at, kind))
end

-- Is the chunk name of an error position one of the library's files? Lua
-- shortens long names to ".../end/of/path.lua"; then the kept end must be
-- the end of the library folder (12 characters at least, against chance
-- matches) followed by a file name.
local DIR = PREFIX:sub(2)
local function library_chunk(path)
  if in_library("@" .. path) then return true end
  local tail = path:match("^%.%.%.(.+)$")
  if not tail then return false end
  for i = 1, #tail do
    local head = tail:sub(1, i)
    if #head >= 12 and DIR:sub(-#head) == head and not tail:sub(i + 1):find("..", 1, true) then return true end
  end
  return false
end

-- "lua/ember/x.lua:12: msg" -> "msg" when the position is in the library.
local function strip_library_position(msg)
  if type(msg) ~= "string" then return msg end
  local path, rest = msg:match("^([^\n:]*):%d+: (.*)$")
  if path and library_chunk(path) then return rest end
  return msg
end
M.strip_library_position = strip_library_position

-- pcall's results, passed on as they are on success (no table: wrap is on
-- every nn forward); an error is raised again at the user's line.
local function pass_or_raise(ok, ...)
  if ok then return ... end
  local raw = ...
  local msg = strip_library_position(raw)
  if type(msg) == "string" and (msg ~= raw or not msg:match("^[^\n:]*:%d+: ")) then M.error(msg) end
  error(msg, 0) -- already at a user's line (a callback of theirs), or not a string
end

-- pcall's results of a module's forward: an error that an nn.functional function raised on
-- the module's behalf ("nn.functional.avg_pool1d: ...") names the forward the user called
-- ("LPPool1d.forward: ...", from self.__name), its position kept.
local function as_forward(self, ok, ...)
  if ok then return ok, ... end
  local msg = ...
  if type(msg) == "string" and type(self) == "table" and type(self.__name) == "string" then
    local pos, rest = msg:match("^([^\n:]*:%d+: )(nn%.functional%.[%w_]+: .*)$")
    if not pos then pos, rest = "", msg:match("^nn%.functional%.[%w_]+: .*$") end
    if rest then msg = pos .. (rest:gsub("^nn%.functional%.[%w_]+: ", self.__name .. ".forward: ", 1)) end
  end
  return false, msg
end

function M.wrap(fn, forward)
  if forward then return function(self, ...) return pass_or_raise(as_forward(self, pcall(fn, self, ...))) end end
  return function(...) return pass_or_raise(pcall(fn, ...)) end
end

return M
