-- Attention masks given to the nn layers, in one place.
--
-- PyTorch has two conventions for a boolean mask: nn.MultiheadAttention's
-- attn_mask is true where attention is NOT allowed, F.scaled_dot_product_
-- attention's is true where it IS. A mask written for one and read with the
-- other attends exactly where it should not, with no error. So the nn
-- layers take a boolean mask only under a name that says which it is:
--
--   allow_mask   bool, true = may attend (SDPA's convention)
--   block_mask   bool, true = masked out (nn.MultiheadAttention's)
--   attn_mask    float only: added to the scores (-inf blocks); both
--                PyTorch APIs agree on this one. A boolean attn_mask is
--                an error that names the two alternatives.
--
-- Layers with several masks prefix the names: tgt_mask / tgt_allow_mask /
-- tgt_block_mask, memory_mask / memory_allow_mask / memory_block_mask.
-- ember.Attention, SDPA's peer, keeps SDPA's boolean attn_mask.
local errors = require "ember._errors"
local ember = require "ember.nn._ember"

local M = {}

local function is_bool(t) return t ~= nil and t.dtype == "bool" end

-- The mask for ember.Attention from opts[float_name], opts[allow_name]
-- and opts[block_name] (at most one of them), or nil.
function M.resolve(opts, who, float_name, allow_name, block_name)
  local f, a, b = opts[float_name], opts[allow_name], opts[block_name]
  local n = (f ~= nil and 1 or 0) + (a ~= nil and 1 or 0) + (b ~= nil and 1 or 0)
  if n > 1 then
    errors.raise("%s: give one of %s, %s and %s, not several", who, float_name, allow_name, block_name)
  end
  if is_bool(f) then
    errors.raise("%s: a boolean %s is ambiguous (nn.MultiheadAttention: true = masked; "
      .. "scaled_dot_product_attention: true = may attend). Pass it as %s (true = may attend) "
      .. "or %s (true = masked), or give a float mask (added to the scores)",
      who, float_name, allow_name, block_name)
  end
  if a ~= nil and not is_bool(a) then
    errors.raise("%s: %s must be a bool tensor (true = may attend), got %s", who, allow_name,
      a.dtype or type(a))
  end
  if b ~= nil then
    if not is_bool(b) then
      errors.raise("%s: %s must be a bool tensor (true = masked), got %s", who, block_name, b.dtype or type(b))
    end
    return b:logical_not()
  end
  return f or a
end

-- The mask option names of one prefix: "" -> attn_mask, allow_mask, block_mask.
function M.names(prefix)
  if prefix == "" then return "attn_mask", "allow_mask", "block_mask" end
  return prefix .. "_mask", prefix .. "_allow_mask", prefix .. "_block_mask"
end

-- Puts a resolved mask into a MultiHeadAttention options table `out`
-- under the name that says what it is.
function M.for_mha(mask, out)
  if is_bool(mask) then out.allow_mask = mask else out.attn_mask = mask end
  return out
end

-- PyTorch's float key padding mask [B, S] (added to the scores: torch.nn.MultiheadAttention
-- and the Transformer layers take one), folded into the resolved mask `mask`
-- (float; bool, true = may attend; or nil) for nn.MultiHeadAttention, whose
-- key_padding_mask is bool only. Returns the mask and the key padding mask
-- left to pass on (nil once folded; a bool one, or nil, passes as it is).
-- A float mask and a float key padding mask are added, as PyTorch 2.x's
-- (1.13's masked_fill refuses the pair). `name` is the option the caller took.
function M.fold_float_padding(who, name, mask, kpm, B, S, dtype)
  if not ember.is_tensor(kpm) or kpm.dtype == "bool" then return mask, kpm end
  if not ember.dtype_info(kpm.dtype).floating or kpm.ndim ~= 2 or kpm.shape[1] ~= B or kpm.shape[2] ~= S then
    errors.raise("%s: %s must be [B=%d, S=%d], bool (true = padding) or float (added to the scores), got %s %s", who,
      name, B, S, errors.shape_str(kpm), kpm.dtype)
  end
  local add = kpm:to(dtype):view(B, 1, 1, S)
  if mask == nil then return add, nil end
  if is_bool(mask) then
    mask = ember.zeros(mask.shape, { dtype = dtype, device = mask.device }):masked_fill(mask:logical_not(), -math.huge)
  end
  return mask + add, nil
end

return M
