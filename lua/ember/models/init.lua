-- ember.models: reference models built from ember.nn, one per file (Llama, ViT).
-- `local models = require "ember.models"` (or `ember.models`, loaded on first use).
return {
  Llama = require "ember.models.llama",
  ViT = require "ember.models.vit",
}
