-- ember/_torch_load.lua: files written by torch.save (.pt, .pth, Hugging
-- Face's pytorch_model.bin) read without Python, as
-- torch.load(path, map_location="cpu", weights_only=True) reads them;
-- ember.load (checkpoint.lua) calls it for such a file.
--
-- The file is a zip archive (PyTorch >= 1.6): <name>/data.pkl, a pickle of
-- the saved object, whose tensors point at <name>/data/<key>, raw
-- little-endian storages (stored, not compressed). The pickle is run by a
-- small machine that knows the opcodes of protocols 2 to 5 and only the
-- globals a saved state dict or training checkpoint uses (tensors,
-- Parameters, OrderedDict, Counter, torch.Size, storages, numpy scalars): as
-- weights_only, any other global, such as a class of the user's, is
-- refused by name and never run. Storages are read one at a time from the
-- file (never the whole file into memory), once each, and tensors that
-- share one (tied weights, views) are cut from it. The legacy format
-- (before PyTorch 1.6, or _use_new_zipfile_serialization=False: pickles and
-- storages one after the other) is read too, whole (legacy_load).
--
-- What the object becomes: a tensor an ember tensor (float16 read as
-- float32, int32/int16/int8/uint8 as int64, exactly, as ember has none of
-- those dtypes; a tensor saved with requires_grad, or a Parameter, requires
-- grad again); a dict or OrderedDict a table with its keys (Python ints
-- stay the same integers); a list or tuple a Lua list; None nothing (a key
-- whose value is None is absent); torch.Size an ember.Size; a str a string.
local M = {}

local function ember() return require "ember" end

local function fail(path, fmt, ...)
  error(("ember.load: '%s': " .. fmt):format(path, ...), 0)
end

-- ---- the zip archive ------------------------------------------------------

-- A zip64 extra field's 8-byte values, in the order the 0xffffffff fields
-- of the central directory entry come.
local function zip64_extra(extra, want)
  local at = 1
  while at + 3 <= #extra do
    local id, size = string.unpack("<I2I2", extra, at)
    if id == 1 then
      local out, p = {}, at + 4
      for i = 1, want do out[i], p = string.unpack("<I8", extra, p) end
      return out
    end
    at = at + 4 + size
  end
  return {}
end

-- name -> {offset = data's 0-based offset in the file, size = bytes} for
-- each entry; stored entries only.
local function zip_entries(path, f)
  local size = f:seek("end")
  local tail_len = math.min(size, 65557)
  f:seek("set", size - tail_len)
  local tail = f:read(tail_len) or ""
  local eocd
  for i = #tail - 21, 1, -1 do
    if tail:sub(i, i + 3) == "PK\5\6" then eocd = i; break end
  end
  if not eocd then fail(path, "a zip archive without its central directory (truncated?)") end
  local count, cd_size, cd_off = string.unpack("<I2I4I4", tail, eocd + 10)
  if count == 0xffff or cd_off == 0xffffffff or cd_size == 0xffffffff then -- zip64: the locator is just before
    local loc = eocd - 20
    if loc < 1 or tail:sub(loc, loc + 3) ~= "PK\6\7" then fail(path, "a zip64 archive without its locator") end
    local rec_off = string.unpack("<I8", tail, loc + 8)
    f:seek("set", rec_off)
    local rec = f:read(56) or ""
    if rec:sub(1, 4) ~= "PK\6\6" then fail(path, "a zip64 archive whose end record is missing") end
    count, cd_size, cd_off = string.unpack("<I8I8I8", rec, 33)
  end
  f:seek("set", cd_off)
  local cd = f:read(cd_size) or ""
  if #cd ~= cd_size then fail(path, "the zip's central directory is cut short (truncated?)") end
  local entries, at = {}, 1
  for _ = 1, count do
    if cd:sub(at, at + 3) ~= "PK\1\2" then fail(path, "a damaged zip central directory") end
    local method, csize, usize, nlen, xlen, clen, local_off =
      string.unpack("<I2 xxxxxxxx I4I4 I2I2I2 xxxxxxxx I4", cd, at + 10)
    local name = cd:sub(at + 46, at + 45 + nlen)
    local extra = cd:sub(at + 46 + nlen, at + 45 + nlen + xlen)
    local want = {}
    if usize == 0xffffffff then want[#want + 1] = "usize" end
    if csize == 0xffffffff then want[#want + 1] = "csize" end
    if local_off == 0xffffffff then want[#want + 1] = "off" end
    if #want > 0 then
      local v = zip64_extra(extra, #want)
      for i, k in ipairs(want) do
        if k == "usize" then usize = v[i] elseif k == "csize" then csize = v[i] else local_off = v[i] end
      end
    end
    entries[name] = { method = method, size = usize, csize = csize, local_off = local_off }
    at = at + 46 + nlen + xlen + clen
  end
  return entries
end

-- The bytes of entry e.
local function read_entry(path, f, name, e)
  if e.method ~= 0 then
    fail(path, "entry '%s' is compressed (zip method %d); torch.save stores its entries uncompressed, so this "
      .. "file was rezipped: unzip and zip it again with -0, or re-save it with torch.save", name, e.method)
  end
  if not e.offset then
    f:seek("set", e.local_off)
    local h = f:read(30) or ""
    if h:sub(1, 4) ~= "PK\3\4" then fail(path, "a damaged zip entry '%s'", name) end
    local nlen, xlen = string.unpack("<I2I2", h, 27)
    e.offset = e.local_off + 30 + nlen + xlen
  end
  f:seek("set", e.offset)
  local s = e.size > 0 and f:read(e.size) or ""
  if #s ~= e.size then fail(path, "entry '%s' is cut short (truncated?)", name) end
  return s
end

-- ---- storages and tensors -------------------------------------------------

-- torch's storage classes -> frombuffer's element type (ember.frombuffer).
local STORAGES = {
  FloatStorage = "float32", DoubleStorage = "float64", HalfStorage = "float16", BFloat16Storage = "bfloat16",
  LongStorage = "int64", IntStorage = "int32", ShortStorage = "int16", CharStorage = "int8",
  ByteStorage = "uint8", BoolStorage = "bool", UntypedStorage = "uint8",
}
local ELEMENT_BYTES = { float32 = 4, float64 = 8, float16 = 2, bfloat16 = 2, int64 = 8, int32 = 4, int16 = 2,
  int8 = 1, uint8 = 1, bool = 1 }

local StorageType = { __name = "torch storage type" }
local Storage = { __name = "torch storage" }

-- A tensor of size and stride cut from storage s at offset (elements).
local function rebuild_tensor(s, offset, size, stride)
  local e = ember()
  local flat = s:data()
  local shape, n, contiguous, expect = {}, 1, true, 1
  for i = #size, 1, -1 do
    if size[i] ~= 1 and stride[i] ~= expect then contiguous = false end
    expect = expect * size[i]
  end
  for i, v in ipairs(size) do shape[i] = v; n = n * v end
  local t
  if n == 0 then
    t = e.zeros(shape, { dtype = flat.dtype })
  elseif contiguous then
    t = flat:narrow(1, offset + 1, n):clone():view(shape)
  else -- any strides (a transposed or expanded tensor was saved): each element's place in the storage
    local idx = e.full({}, offset, { dtype = "int64" })
    for d = 1, #size do
      local view = {}
      for k = 1, #size do view[k] = k == d and size[d] or 1 end
      idx = idx + e.arange(0, size[d], { dtype = "int64" }):view(view) * stride[d]
    end
    t = flat:index_select(1, idx:reshape(-1) + 1):view(shape)
  end
  return t
end

-- ---- the pickle machine ---------------------------------------------------

local NONE = setmetatable({}, { __name = "None" })
local legacy_load -- the legacy format's reader (below)
local Dict = { __name = "dict" }   -- keys and values, in a plain table once built

local function new_dict() return setmetatable({}, Dict) end

-- Python's callables that a saved state dict or checkpoint needs, by
-- "module.name"; each takes the pickled arguments (a Lua list).
local function globals(path)
  local g = {}
  g["collections.OrderedDict"] = function() return new_dict() end
  g["builtins.dict"] = g["collections.OrderedDict"]
  -- Counter(dict): MultiStepLR's milestones in torch's scheduler state_dict, read as the dict
  g["collections.Counter"] = function(a) return a[1] or new_dict() end
  g["torch._utils._rebuild_tensor"] = function(a) return rebuild_tensor(a[1], a[2], a[3], a[4]) end
  g["torch._utils._rebuild_tensor_v2"] = function(a)
    local t = rebuild_tensor(a[1], a[2], a[3], a[4])
    if a[5] == true and ember().dtype_info(t.dtype).floating then t:requires_grad_(true) end
    return t
  end
  g["torch._utils._rebuild_parameter"] = function(a)
    local t = a[1]
    if a[2] ~= false and ember().dtype_info(t.dtype).floating then t:requires_grad_(true) end
    return t
  end
  g["torch._utils._rebuild_parameter_with_state"] = g["torch._utils._rebuild_parameter"]
  g["torch._tensor._rebuild_from_type_v2"] = function(a) return a[1](a[3]) end -- func(args): a subclass read as a tensor
  g["torch.Size"] = function(a) return ember().Size(table.unpack(a[1] or {})) end
  g["torch.device"] = function(a) return tostring(a[1]) end
  g["builtins.set"] = function(a) return a[1] or {} end
  g["builtins.frozenset"] = g["builtins.set"]
  for name, kind in pairs(STORAGES) do
    g["torch." .. name] = setmetatable({ kind = kind, name = name }, StorageType)
  end
  -- numpy scalars and dtypes (a checkpoint's best_acc = np.float64(...))
  g["numpy.dtype"] = function(a) return { numpy_dtype = a[1] } end
  g["numpy.core.multiarray.scalar"] = function(a)
    local code, bytes = a[1] and a[1].numpy_dtype, a[2]
    local fmt = ({ f8 = "<d", f4 = "<f", i8 = "<i8", i4 = "<i4", i2 = "<i2", i1 = "<i1", u1 = "<I1", u2 = "<I2",
      u4 = "<I4", u8 = "<I8", b1 = "<I1" })[code or ""]
    if not fmt or type(bytes) ~= "string" then fail(path, "a numpy scalar of dtype %s, which ember does not read", tostring(code)) end
    local v = string.unpack(fmt, bytes)
    if code == "b1" then v = v ~= 0 end
    return v
  end
  g["numpy._core.multiarray.scalar"] = g["numpy.core.multiarray.scalar"]
  -- protocol 2 writes bytes as _codecs.encode(the text, "latin1"): one byte per code point
  g["_codecs.encode"] = function(a)
    if a[2] ~= "latin1" and a[2] ~= "latin-1" then fail(path, "_codecs.encode with %s, not latin1", tostring(a[2])) end
    local out = {}
    for _, c in utf8.codes(a[1]) do
      if c > 255 then fail(path, "a latin1 byte string holds code point %d", c) end
      out[#out + 1] = string.char(c)
    end
    return table.concat(out)
  end
  for _, dt in ipairs { "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool" } do
    g["torch." .. dt] = dt -- a dtype object, e.g. in a tensor's metadata
  end
  return g
end

local function call(path, g, fn, args)
  if type(fn) == "function" then return fn(args) end
  if type(fn) == "table" and fn.global then
    fail(path, "the pickle calls %s, which ember does not run: as torch.load(weights_only=True), only tensors, "
      .. "dicts, lists and numbers are read (save model.state_dict() rather than the model, or convert the file "
      .. "with safetensors.torch.save_file)", fn.global)
  end
  fail(path, "the pickle calls a %s", type(fn))
end

-- Runs the pickle in s from byte `start` (default 1); persistent(pid) gives
-- the object of a persistent id. Returns the object and the byte after its
-- STOP. `dry`: no global is called (each call gives an empty table), so no
-- tensor is built: to find where the pickle ends and what storages it names.
local function unpickle(path, s, persistent, start, dry)
  local g = globals(path)
  local stack, marks, memo = {}, {}, {}
  local pos, n_memo = start or 1, 0
  local invoke = dry and function() return {} end or call
  local function push(v) stack[#stack + 1] = v end
  local function pop()
    local v = stack[#stack]
    stack[#stack] = nil
    return v
  end
  local function top() return stack[#stack] end
  local function pop_mark()
    local m = table.remove(marks)
    if not m then fail(path, "a damaged pickle (no mark)") end
    local items = {}
    for i = m + 1, #stack do items[#items + 1] = stack[i] end
    for i = #stack, m + 1, -1 do stack[i] = nil end
    return items
  end
  local function read(fmt)
    local v, nxt = string.unpack(fmt, s, pos)
    pos = nxt
    return v
  end
  local function line()
    local e = s:find("\n", pos, true)
    if not e then fail(path, "a damaged pickle (a line without its end)") end
    local l = s:sub(pos, e - 1)
    pos = e + 1
    return l
  end
  local function global(mod, name)
    local key = mod .. "." .. name
    local v = g[key]
    if v == nil then return { global = key } end
    return v
  end
  local function setitem(d, k, v)
    if type(d) ~= "table" then fail(path, "a damaged pickle (an item set on a %s)", type(d)) end
    if v ~= NONE then d[k] = v end
  end
  local function long_bytes(b) -- little-endian two's complement
    if #b == 0 then return 0 end
    if #b > 8 then fail(path, "an integer of %d bytes, past int64", #b) end
    local v = string.unpack("<i" .. #b, b)
    return v
  end
  while true do
    if pos > #s then fail(path, "the pickle ends before its STOP (truncated?)") end
    local op = s:byte(pos)
    pos = pos + 1
    if op == 0x80 then pos = pos + 1                                   -- PROTO
    elseif op == 0x95 then pos = pos + 8                               -- FRAME
    elseif op == 0x2e then                                             -- STOP
      local v = pop()
      return v, pos
    elseif op == 0x28 then marks[#marks + 1] = #stack                  -- MARK
    elseif op == 0x7d then push(new_dict())                            -- EMPTY_DICT
    elseif op == 0x5d or op == 0x29 or op == 0x8f then push({})        -- EMPTY_LIST, EMPTY_TUPLE, EMPTY_SET
    elseif op == 0x71 then memo[read("B")] = top()                     -- BINPUT
    elseif op == 0x72 then memo[read("<I4")] = top()                   -- LONG_BINPUT
    elseif op == 0x70 then memo[tonumber(line())] = top()              -- PUT
    elseif op == 0x94 then memo[n_memo] = top(); n_memo = n_memo + 1   -- MEMOIZE
    elseif op == 0x68 then push(memo[read("B")])                       -- BINGET
    elseif op == 0x6a then push(memo[read("<I4")])                     -- LONG_BINGET
    elseif op == 0x67 then push(memo[tonumber(line())])                -- GET
    elseif op == 0x63 then                                             -- GLOBAL
      local mod = line()
      push(global(mod, line()))
    elseif op == 0x93 then                                             -- STACK_GLOBAL
      local name = pop()
      push(global(pop(), name))
    elseif op == 0x58 then local n = read("<I4"); push(s:sub(pos, pos + n - 1)); pos = pos + n   -- BINUNICODE
    elseif op == 0x8c or op == 0x55 or op == 0x43 then                 -- SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
      local n = read("B"); push(s:sub(pos, pos + n - 1)); pos = pos + n
    elseif op == 0x54 or op == 0x42 then local n = read("<I4"); push(s:sub(pos, pos + n - 1)); pos = pos + n -- BINSTRING, BINBYTES
    elseif op == 0x8d or op == 0x8e then local n = read("<I8"); push(s:sub(pos, pos + n - 1)); pos = pos + n -- BINUNICODE8, BINBYTES8
    elseif op == 0x4a then push(read("<i4"))                           -- BININT
    elseif op == 0x4b then push(read("B"))                             -- BININT1
    elseif op == 0x4d then push(read("<I2"))                           -- BININT2
    elseif op == 0x8a then local n = read("B"); push(long_bytes(s:sub(pos, pos + n - 1))); pos = pos + n -- LONG1
    elseif op == 0x8b then local n = read("<I4"); push(long_bytes(s:sub(pos, pos + n - 1))); pos = pos + n -- LONG4
    elseif op == 0x49 then                                             -- INT (and the bools I01/I00)
      local l = line()
      if l == "01" then push(true) elseif l == "00" then push(false) else push(math.tointeger(tonumber(l))) end
    elseif op == 0x4c then push(math.tointeger(tonumber((line():gsub("L$", "")))))   -- LONG
    elseif op == 0x46 then push(tonumber(line()))                      -- FLOAT
    elseif op == 0x47 then push(read(">d"))                            -- BINFLOAT
    elseif op == 0x4e then push(NONE)                                  -- NONE
    elseif op == 0x88 then push(true)                                  -- NEWTRUE
    elseif op == 0x89 then push(false)                                 -- NEWFALSE
    elseif op == 0x74 or op == 0x6c or op == 0x91 then push(pop_mark()) -- TUPLE, LIST, FROZENSET
    elseif op == 0x85 then push({ pop() })                             -- TUPLE1
    elseif op == 0x86 then local b = pop(); push({ pop(), b })         -- TUPLE2
    elseif op == 0x87 then local c, b = pop(), pop(); push({ pop(), b, c }) -- TUPLE3
    elseif op == 0x64 then                                             -- DICT
      local items, d = pop_mark(), new_dict()
      for i = 1, #items, 2 do setitem(d, items[i], items[i + 1]) end
      push(d)
    elseif op == 0x61 then local v = pop(); local l = top(); l[#l + 1] = v -- APPEND (None kept in place until plain)
    elseif op == 0x65 or op == 0x90 then                               -- APPENDS, ADDITEMS
      local items = pop_mark()
      local l = top()
      for _, v in ipairs(items) do l[#l + 1] = v end
    elseif op == 0x73 then local v = pop(); local k = pop(); setitem(top(), k, v) -- SETITEM
    elseif op == 0x75 then                                             -- SETITEMS
      local items = pop_mark()
      local d = top()
      for i = 1, #items, 2 do setitem(d, items[i], items[i + 1]) end
    elseif op == 0x52 then local args = pop(); push(invoke(path, g, pop(), args)) -- REDUCE
    elseif op == 0x81 then local args = pop(); push(invoke(path, g, pop(), args)) -- NEWOBJ
    elseif op == 0x92 then pop(); local args = pop(); push(invoke(path, g, pop(), args)) -- NEWOBJ_EX (kwargs dropped)
    elseif op == 0x62 then pop()                                       -- BUILD: attributes (an OrderedDict's _metadata) dropped
    elseif op == 0x51 then push(persistent(pop()))                     -- BINPERSID
    elseif op == 0x50 then push(persistent(line()))                    -- PERSID
    elseif op == 0x30 then pop()                                       -- POP
    elseif op == 0x31 then pop_mark()                                  -- POP_MARK
    elseif op == 0x32 then push(top())                                 -- DUP
    else
      fail(path, "pickle opcode 0x%02x at byte %d is not one a saved tensor or state dict uses", op, pos - 2)
    end
  end
end

-- Dicts lose their marker; what is left is plain Lua.
local function plain(v, seen)
  if type(v) ~= "table" or ember().is_tensor(v) then return v end
  if v == NONE then return nil end
  seen = seen or {}
  if seen[v] then return seen[v] end
  local mt = getmetatable(v)
  if mt == Dict then setmetatable(v, nil) elseif mt ~= nil then return v end
  seen[v] = v
  for k, x in pairs(v) do v[k] = plain(x, seen) end
  return v
end

-- A storage of kind `kind` whose data() is the tensor read(self) gives, once.
local function new_storage(kind, key, numel, read)
  local st = setmetatable({ kind = kind, key = key, numel = numel }, Storage)
  st.data = function(self)
    if not self.tensor then self.tensor = read(self) end
    return self.tensor
  end
  return st
end

-- The storage type of a persistent id, checked.
local function storage_kind(path, stype)
  if getmetatable(stype) ~= StorageType then
    fail(path, "a storage of type %s, which ember does not read (complex or quantized?)",
      type(stype) == "table" and tostring(stype.global) or tostring(stype))
  end
  return stype.kind
end

-- The legacy format (torch.save before PyTorch 1.6, or with
-- _use_new_zipfile_serialization=False): five pickles one after the other
-- (the magic number 0x1950a86a20f9469cfc6c, the protocol version 1001, the
-- system info, the object, the list of its storages' keys), then each
-- storage in that order as its element count (int64) and its bytes. The
-- file is read whole; the object's pickle is run once dry to find where
-- the storages begin.
local LEGACY_MAGIC = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e"
function legacy_load(path, f)
  f:seek("set", 0)
  local s = f:read("a") or ""
  if s:sub(1, #LEGACY_MAGIC) ~= LEGACY_MAGIC then
    fail(path, "neither a zip archive nor the legacy format of torch.save (not a PyTorch file, or damaged)")
  end
  local proto, pos = unpickle(path, s, nil, #LEGACY_MAGIC + 1)
  if proto ~= 1001 then fail(path, "the legacy format's protocol version %s, not 1001", tostring(proto)) end
  local info
  info, pos = unpickle(path, s, nil, pos)
  if type(info) == "table" and info.little_endian == false then
    fail(path, "saved on a big-endian machine; ember reads little-endian storages only")
  end
  local obj_at, kinds, storages, at = pos, {}, {}, {}
  -- a dry run names the storages' kinds; their bytes follow the keys' pickle, in its order
  local _, after = unpickle(path, s, function(pid)
    if type(pid) == "table" and pid[1] == "storage" then kinds[tostring(pid[3])] = storage_kind(path, pid[2]) end
    return {}
  end, obj_at, true)
  local keys
  keys, pos = unpickle(path, s, nil, after)
  if type(keys) ~= "table" then fail(path, "a damaged legacy file (no list of storages)") end
  for _, k in ipairs(keys) do
    if pos + 7 > #s then fail(path, "storage '%s' is missing (truncated?)", tostring(k)) end
    local count = string.unpack("<i8", s, pos)
    at[tostring(k)] = { pos + 8, count }
    pos = pos + 8 + count * (ELEMENT_BYTES[kinds[tostring(k)] or "uint8"] or 1)
  end
  -- the storages, read on first use
  local obj = unpickle(path, s, function(pid)
    if type(pid) ~= "table" or pid[1] ~= "storage" then
      fail(path, "a persistent id that is not a storage (%s)", type(pid) == "table" and tostring(pid[1]) or tostring(pid))
    end
    if pid[6] ~= nil and pid[6] ~= NONE then
      fail(path, "a view of a storage (a file from PyTorch before 0.4), which ember does not read")
    end
    local key = tostring(pid[3])
    storages[key] = storages[key] or new_storage(storage_kind(path, pid[2]), key, pid[5], function(st)
      local w = at[key]
      if not w then fail(path, "storage '%s' is missing from the file (truncated?)", key) end
      local n = w[2] * ELEMENT_BYTES[st.kind]
      if w[1] + n - 1 > #s then fail(path, "storage '%s' is cut short (truncated?)", key) end
      return ember().frombuffer(s:sub(w[1], w[1] + n - 1), { dtype = st.kind, count = w[2] })
    end)
    return storages[key]
  end, obj_at)
  return plain(obj)
end

--- The object torch.save wrote to path (see the file's header).
function M.load(path)
  local f, err = io.open(path, "rb")
  if not f then fail(path, "%s", err) end
  local head = f:read(4) or ""
  if head ~= "PK\3\4" then
    local ok, res = pcall(legacy_load, path, f)
    f:close()
    if not ok and not tostring(res):find("^ember%.load: ") then -- a Lua error of a cut pickle
      res = ("ember.load: '%s': a damaged legacy file (truncated?): %s"):format(path,
        tostring(res):gsub("^[^\n]-:%d+: ", ""))
    end
    if not ok then error(res, 0) end
    return res
  end
  local ok, res = pcall(function()
    local entries = zip_entries(path, f)
    local root
    for name in pairs(entries) do
      local r = name:match("^(.-)data%.pkl$")
      if r and (r == "" or r:match("^[^/]*/$")) then root = r end
    end
    if not root then fail(path, "a zip archive without data.pkl: not a torch.save file") end
    local bo = entries[root .. "byteorder"]
    if bo and read_entry(path, f, root .. "byteorder", bo) ~= "little" then
      fail(path, "saved on a big-endian machine; ember reads little-endian storages only")
    end
    local storages = {}
    local function persistent(pid)
      if type(pid) ~= "table" or pid[1] ~= "storage" then
        fail(path, "a persistent id that is not a storage (%s)", type(pid) == "table" and tostring(pid[1]) or tostring(pid))
      end
      local stype, key, numel = pid[2], tostring(pid[3]), pid[5]
      if getmetatable(stype) ~= StorageType then
        fail(path, "a storage of type %s, which ember does not read (complex or quantized?)",
          type(stype) == "table" and tostring(stype.global) or tostring(stype))
      end
      local st = storages[key]
      if not st then
        local name = root .. "data/" .. key
        local e = entries[name]
        if not e then fail(path, "storage '%s' is missing from the archive (truncated?)", name) end
        st = setmetatable({ kind = stype.kind, key = key, numel = numel, entry = e, name = name }, Storage)
        st.data = function(self)
          if not self.tensor then
            local bytes = read_entry(path, f, self.name, self.entry)
            local count = math.tointeger(self.numel) or #bytes // ELEMENT_BYTES[self.kind]
            self.tensor = ember().frombuffer(bytes, { dtype = self.kind, count = count })
          end
          return self.tensor
        end
        storages[key] = st
      end
      return st
    end
    local pkl = read_entry(path, f, root .. "data.pkl", entries[root .. "data.pkl"])
    return plain((unpickle(path, pkl, persistent)))
  end)
  f:close()
  if not ok then error(res, 0) end
  return res
end

--- Does the file at path start as torch.save writes? A zip archive whose
-- first 8 bytes, read as a safetensors header length, would not fit the
-- file, or the legacy format's pickle of its magic number (80 02 8a 0a).
-- A safetensors file can begin with any bytes (its header length), so
-- both tests are needed: ember.save's files with a header of 0x280 bytes
-- start 80 02.
function M.is_torch_file(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local head = f:read(8) or ""
  local size = f:seek("end")
  f:close()
  if head:sub(1, 4) == "\x80\x02\x8a\x0a" then return true end
  if head:sub(1, 4) ~= "PK\3\4" or #head < 8 then return false end
  return string.unpack("<I8", head) > size - 8
end

return M
