-- ember.models: reference models built from ember.nn, one per file (Llama, ViT, CrossAttentionVLM).
-- `local models = require "ember.models"` (or `ember.models`, loaded on first use).
return {
  Llama = require "ember.models.llama",
  ViT = require "ember.models.vit",
  CrossAttentionVLM = require "ember.models.cross_attention_vlm",
}
