-- A broad suite of bad input through the Lua API (issue 11): creation,
-- views, indexing, every op family's shape/dtype/device errors, autograd,
-- nn modules, attention options, optimizers, checkpoints, plugins and
-- devices. Each case must raise a Lua error whose message names the
-- operation (its first field, plain text); errors raised by C functions must
-- point at the caller's line (this file); ember must go on working after
-- each; and the cases together must leave no tensor memory behind. ctest's
-- ASan+UBSan pass runs this file too.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local checkpoint = require "ember.checkpoint"
local i64 = function(t) return ember.tensor(t, { dtype = "int64" }) end
local x23 = ember.ones(2, 3)

-- { needle naming the op, function that must fail [, lua_side = true when
-- the error comes from a Lua module and so points into it] }
local CASES = {

 -- creation
 {"zeros", function() return ember.zeros(-1) end},
 {"zeros", function() return ember.zeros(2.5) end},
 {"zeros", function() return ember.zeros(2, {dtype="float16"}) end},
 {"zeros", function() return ember.zeros(2, {device="tpu"}) end},
 {"zeros", function() return ember.zeros(2, {devcie="cpu"}) end},
 {"zeros", function() return ember.zeros(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1) end},
 {"ones", function() return ember.ones({2, "a"}) end},
 {"'full'", function() return ember.full({2}, "x") end},
 {"'full'", function() return ember.full({2}) end},
 {"tensor", function() return ember.tensor({{1,2},{3}}) end},
 {"tensor", function() return ember.tensor({1, "a"}) end},
 {"tensor", function() return ember.tensor("abc") end},
 {"tensor", function() return ember.tensor({1, {2}}) end},
 {"arange", function() return ember.arange(0, 10, 0) end},
 {"arange", function() return ember.arange(0, 1/0) end},
 {"arange", function() return ember.arange(0, 10, -1) end},
 {"arange", function() return ember.arange(0, 1e300, 1e-300) end},
 {"rand", function() return ember.rand(-2) end},
 {"randn", function() return ember.randn(2, {dtype="int64"}) end},
 {"uniform", function() return ember.uniform({2}, 1, 0) end},
 {"normal", function() return ember.normal({2}, 0, -1) end},
 {"randperm", function() return ember.randperm(-1) end},
 {"randperm", function() return ember.randperm(2^40) end},
 {"from_bytes", function() return ember.from_bytes("abc", {4}) end},
 {"from_bytes", function() return ember.from_bytes("abc", {1}, {offset=-1}) end},
 {"manual_seed", function() return ember.manual_seed("x") end},
 {"one_hot", function() return ember.one_hot(i64{1}, 0) end},
 {"one_hot", function() return ember.one_hot(ember.tensor{1}, 2) end},
 -- views
 {"view", function() return x23:view(4) end},
 {"view", function() return x23:view(-1, -1) end},
 {"view", function() return x23:transpose(1,2):view(6) end},
 {"reshape", function() return x23:reshape(5, -1) end},
 {"expand", function() return x23:expand(3, 3) end},
 {"expand", function() return x23:expand(3) end},
 {"transpose", function() return x23:transpose(1, 3) end},
 {"transpose", function() return ember.tensor(1):transpose(1, 2) end}, -- (1, 1) is torch's (0, 0): a 0-d tensor back
 {"permute", function() return x23:permute(1, 1) end},
 {"permute", function() return x23:permute(1) end},
 {"narrow", function() return x23:narrow(2, 3, 2) end},
 {"narrow", function() return x23:narrow(2, 1, -1) end},
 {"select", function() return x23:select(3, 1) end},
 {"select", function() return x23:select(1, 0) end},
 {"slice", function() return x23:slice(2, 1, 2, 0) end},
 {"squeeze", function() return x23:squeeze(4) end},
 {"unsqueeze", function() return x23:unsqueeze(5) end},
 {"flatten", function() return x23:flatten(2, 1) end},
 {"to", function() return x23:to("float16") end},
 {"to", function() return x23:to("cuda:99") end},
 {"cuda", function() return x23:cuda(0) end},
 {"chunk", function() return x23:chunk(0) end},
 {"split", function() return x23:split(0) end},
 {"cat", function() return ember.cat({x23, ember.ones(3, 3)}, 2) end},
 {"cat", function() return ember.cat({}, 1) end},
 {"cat", function() return ember.cat({x23, 3}, 1) end},
 {"stack", function() return ember.stack({x23, ember.ones(3, 2)}) end},
 -- indexing
 {"index", function() return x23[3] end},
 {"index", function() return x23[0] end},
 {"index", function() return x23[1.5] end},
 {"index", function() return ember.tensor(1)[1] end},
 {"index", function() return x23[i64{5}] end},
 {"setindex", function() x23[3] = 1 end},
 {"setindex", function() local t = ember.ones(2,3); t[1] = ember.ones(4) end},
 {"setindex", function() local t = ember.ones(2,3); t[1] = "x" end},
 {"index_select", function() return x23:index_select(1, i64{3}) end},
 {"index_select", function() return x23:index_select(1, i64{{1}}) end},
 {"index_select", function() return x23:index_select(3, i64{1}) end},
 {"gather", function() return x23:gather(2, i64{{4},{1}}) end},
 {"gather", function() return x23:gather(2, i64{1}) end},
 {"scatter_add", function() return x23:scatter_add(2, i64{{1},{9}}, ember.ones(2,1)) end},
 {"masked_fill", function() return x23:masked_fill(ember.ones(2,3), 0) end},
 {"masked_fill", function() return x23:masked_fill(ember.ones(4):bool(), 0) end},
 {"where", function() return ember.where(ember.ones(2,3), x23, x23) end},
 {"where", function() return ember.where(ember.ones(2):bool(), x23, x23) end},
 {"embedding", function() return ember.embedding(ember.ones(5,2), i64{6}) end},
 {"embedding", function() return ember.embedding(ember.ones(5,2), ember.tensor{1}) end},
 -- elementwise
 {"add", function() return x23 + ember.ones(4) end},
 {"add", function() return x23 + ember.ones(3,2) end},
 {"add", function() return x23 + "a" end},
 {"add", function() return x23 + {} end},
 {"sub", function() return x23 - ember.ones(3, 2) end},
 {"mul", function() return x23 * ember.ones(2,4,{dtype="int64"}) end},
 {"div", function() return x23 / ember.ones(5) end},
 {"pow", function() return x23 ^ ember.ones(5) end},
 {"eq", function() return x23:eq(ember.ones(5)) end},
 {"lt", function() return x23:lt("x") end},
 {"maximum", function() return x23:maximum(ember.ones(4)) end},
 {"logical_and", function() return x23:logical_and(ember.ones(4)) end}, -- float inputs are torch's too: a shape that does not broadcast
 {"logical_not", function() return ember.logical_not("a") end},
 {"exp", function() return i64{1}:exp(2) end}, -- int64 computes in float32, as torch.exp; a surplus argument is refused
 {"neg", function() return ember.ones(2):bool():neg() end},
 {"add_", function() local w = ember.ones(2, {requires_grad=true}); return w:add_(1) end},
 {"add_", function() return x23:add_(ember.ones(4)) end},
 {"ember.mul_", function() return x23:clone():mul_(ember.ones(3,2)) end},
 {"copy_", function() return x23:clone():copy_(ember.ones(4)) end},
 {"fill_", function() return x23:clone():fill_("a") end},
 -- reductions
 {"sum", function() return x23:sum(3) end},
 {"sum", function() return x23:sum(0) end},
 {"sum", function() return x23:sum("a") end},
 {"mean", function() return i64{1,2}:mean() end},
 {"max", function() return ember.zeros(0):max() end},
 {"argmax", function() return x23:argmax(4) end},
 {"var", function() return x23:var(5) end},
 {"softmax", function() return x23:softmax(3) end},
 {"softmax", function() return i64{1}:softmax(1) end},
 {"log_softmax", function() return x23:log_softmax(0) end},
 {"item", function() return x23:item() end},
 -- matmul
 {"matmul", function() return x23:matmul(x23) end},
 {"matmul", function() return ember.tensor(1):matmul(x23) end},
 {"matmul", function() return x23:matmul(ember.ones(3,2,{dtype="float64"})) end},
 {"bmm", function() return ember.bmm(x23, x23) end},
 {"bmm", function() return ember.bmm(ember.ones(2,2,3), ember.ones(3,3,2)) end},
 -- losses, nn functions
 {"cross_entropy", function() return ember.cross_entropy(x23, i64{1,4}) end},
 {"cross_entropy", function() return ember.cross_entropy(x23, i64{1,2,3}) end},
 {"cross_entropy", function() return ember.cross_entropy(x23, ember.tensor{1,2}) end},
 {"mse_loss", function() return ember.mse_loss(x23, ember.ones(3)) end},
 {"layer_norm", function() return ember.layer_norm(x23, {4}) end},
 {"dropout", function() return ember.dropout(x23, 1.5) end},
 {"dropout", function() return ember.dropout(x23, 0/0) end},
 -- autograd
 {"backward", function() return x23:backward() end},
 {"backward", function() local w = ember.ones(2, {requires_grad=true}); return (w*2):backward() end},
 {"backward", function() local w = ember.ones(2, {requires_grad=true}); return (w*2):backward(ember.ones(3)) end},
 {"backward", function() local w = ember.ones(2, {requires_grad=true}); local y = (w*w):sum(); y:backward(); return y:backward() end},
 {"ember.requires_grad_", function() return i64{1}:requires_grad_() end},
 {"grad", function() local w = ember.ones(2, {requires_grad=true}); w.grad = ember.ones(3) end},
 {"ember.Function", function() return ember.Function{name="f", forward=function() return 1 end, backward=print}(x23) end},
 {"ember.Function", function() return ember.Function{name="f"} end},
 -- nn modules
 {"Linear", function() return nn.Linear(0, 3) end},
 {"Linear", function() return nn.Linear(4, 3):forward(ember.ones(2, 5)) end},
 {"ember.uniform", function() return nn.Linear(4, 3, {dtype="int64"}) end, lua_side = true},
 {"Embedding.forward", function() return nn.Embedding(5, 2):forward(i64{7}) end, lua_side = true},
 {"Embedding", function() return nn.Embedding(0, 2) end},
 {"LayerNorm", function() return nn.LayerNorm(4):forward(x23) end},
 {"Dropout", function() return nn.Dropout(2) end},
 {"Sequential", function() return nn.Sequential(3) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(6, 4) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2):forward(ember.ones(2, 3, 5)) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="nonexistent"}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="local", window=-1}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="local", bogus=1}) end},
 {"MultiHeadAttention", function() return nn.TransformerEncoderLayer(8, 3) end},
 {"ember.cross_entropy", function() return nn.CrossEntropyLoss():forward(x23, i64{1}) end, lua_side = true},
 {"Linear.load_state_dict", function() return nn.Linear(4,3):load_state_dict({weight=ember.ones(2,2)}) end},
 -- optimizers
 {"AdamW", function() return optim.AdamW({}, {lr=1}) end},
 {"AdamW", function() return optim.AdamW({ember.ones(2,{requires_grad=true}) * 2}, {lr=1}) end},
 {"AdamW", function() return optim.AdamW({ember.ones(2,{requires_grad=true})}, {lr=-1}) end},
 {"AdamW", function() return optim.AdamW({ember.ones(2,{requires_grad=true})}, {lrr=1}) end},
 {"SGD", function() return optim.SGD({ember.ones(2,{requires_grad=true})}) end},
 {"WarmupCosine", function() return optim.WarmupCosine(3, {warmup_steps=1, total_steps=1}) end},
 -- checkpoints
 {"ember.safetensors_save", function() return checkpoint.save_tensors("/nonexistent/dir/x.safetensors", {w=x23}) end},
 {"ember.safetensors_load", function() return checkpoint.load_tensors("/nonexistent.safetensors") end},
 {"ember.safetensors_load", function() return checkpoint.load_tensors("/etc/hostname") end},
 {"checkpoint.save_tensors", function() return checkpoint.save_tensors(3, {}) end},
 -- plugins and devices
 {"load_plugin", function() return ember.load_plugin("/nonexistent.so") end},
 {"set_num_threads", function() return ember.set_num_threads(0) end},
 {"set_num_threads", function() return ember.set_num_threads("a") end},
 -- closed tensors
 {"tensor was closed", function() local t = ember.ones(2); t:close(); return t + 1 end},
 -- attention options of every variant: type, choice, range
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="local", window_left="a"}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="local", mode="diagonal"}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="linear", feature_map="relu"}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="linear", num_features=1.5}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="linear", redraw="yes"}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="relpos", mode="rope"}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="relpos", bidirectional=1}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention="standard", kernel="magic"}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {attention=3}) end},
 {"MultiHeadAttention", function() return nn.MultiHeadAttention(8, 2, {dropout=2}) end},
 -- the repros of issue 11 belong here too
 {"ember.expand", function() return ember.zeros(1, 1):expand(2^32, 2^32) end},
 {"ember.view", function() return ember.zeros(2, 2):view(2^62, 4) end},
 {"ember.zeros", function() return ember.zeros(0, 2^40, 2^40) end},
 {"ember.select", function() return x23:select(1, math.mininteger) end},
 {"ember.narrow", function() return x23:narrow(1, math.mininteger, 1) end},
 {"ember.narrow", function() return x23:narrow(1, 1, math.maxinteger) end},
 {"ember.index", function() return x23[math.mininteger] end},
 {"ember.index", function() return x23[ember.tensor{1}] end},
 {"ember.index", function() return x23[true] end},
 {"ember.from_bytes", function() return ember.from_bytes("abc", {2, 2}) end},
 {"ember.to", function() return x23:to("float16") end},
 {"Linear.forward", function() return nn.Linear(4, 3):forward(ember.tensor(1)) end},
 {"AdamW", function() return optim.AdamW({ember.ones(2,{requires_grad=true})}, {lr=0/0}) end},
 {"AdamW", function() return optim.AdamW({ember.ones(2,{requires_grad=true})}, {betas={0/0, 0.999}}) end},
 {"Adam", function() return optim.Adam({ember.ones(2,{requires_grad=true})}, {eps=0/0}) end},
 {"badgrad", function()
   local F = ember.Function{name="badgrad", forward=function(ctx, a) return a * 1 end, backward=function(ctx, g) return g:double() end}
   return F(ember.ones(2, {requires_grad=true})):sum():backward() end},
 -- devices
 {"ember.zeros", function() return ember.zeros(2, {device="cuda:0"}) end},
 {"ember.zeros", function() return ember.zeros(2, {device=3}) end},
 {"ember.to", function() return x23:to("cpu:2") end},
}

-- Lua modules raise from their own files; C functions raise at the caller.
local function from_c(needle)
  return needle:match("^ember%.%l") and needle ~= "ember.safetensors_save" and needle ~= "ember.safetensors_load"
end

describe("bad input", function()
  it(("%d cases, each a clear Lua error naming the op"):format(#CASES), function()
    collectgarbage()
    collectgarbage()
    local before = ember.live_bytes()
    local problems = {}
    for i, c in ipairs(CASES) do
      local needle, f = c[1], c[2]
      local ok, msg = pcall(f)
      if ok then
        problems[#problems + 1] = ("case %d (%s): no error"):format(i, needle)
      elseif type(msg) ~= "string" then
        problems[#problems + 1] = ("case %d (%s): error is a %s"):format(i, needle, type(msg))
      elseif not msg:find(needle, 1, true) then
        problems[#problems + 1] = ("case %d: %q does not name %s"):format(i, msg, needle)
      elseif from_c(needle) and not c.lua_side and not msg:find("bad_input_spec.lua:", 1, true) then
        problems[#problems + 1] = ("case %d: %q is not at the caller's line"):format(i, msg)
      end
      assert.are.equal(6, ember.ones(2, 3):sum():item()) -- still alive
    end
    assert.are.same({}, problems)
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, ember.live_bytes(), "tensor memory left behind by the failing calls")
  end)
end)
