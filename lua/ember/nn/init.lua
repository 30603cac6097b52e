-- ember.nn: modules and losses in Torch7 style (one module per file, all
-- built on nn.Module). `local nn = require "ember.nn"`; `nn.Linear(4, 3)`.
return {
  Module = require "ember.nn.Module",
  Sequential = require "ember.nn.Sequential",
  Linear = require "ember.nn.Linear",
  Embedding = require "ember.nn.Embedding",
  LayerNorm = require "ember.nn.LayerNorm",
  Dropout = require "ember.nn.Dropout",
  ReLU = require "ember.nn.ReLU",
  GELU = require "ember.nn.GELU",
  FeedForward = require "ember.nn.FeedForward",
  SiLU = require "ember.nn.SiLU",
  RMSNorm = require "ember.nn.RMSNorm",
  Identity = require "ember.nn.Identity",
  Flatten = require "ember.nn.Flatten",
  ModuleList = require "ember.nn.ModuleList",
  ModuleDict = require "ember.nn.ModuleDict",
  -- nn.init.xavier_uniform_ and the rest (torch.nn.init); the file is not
  -- ember/nn/init.lua, which is this package's own file
  init = require "ember.nn.weight_init",
  -- nn.checkpoint(fn, ...): activation checkpointing
  checkpoint = require("ember.nn.activation_checkpoint").checkpoint,
  SinusoidalPositionalEncoding = require "ember.nn.SinusoidalPositionalEncoding",
  LearnedPositionalEncoding = require "ember.nn.LearnedPositionalEncoding",
  Attention = require "ember.nn.Attention",
  MultiHeadAttention = require "ember.nn.MultiHeadAttention",
  TransformerEncoderLayer = require "ember.nn.TransformerEncoderLayer",
  TransformerDecoderLayer = require "ember.nn.TransformerDecoderLayer",
  TransformerEncoder = require "ember.nn.TransformerEncoder",
  TransformerDecoder = require "ember.nn.TransformerDecoder",
  CrossAttentionBlock = require "ember.nn.CrossAttentionBlock",
  CrossEntropyLoss = require "ember.nn.CrossEntropyLoss",
  MSELoss = require "ember.nn.MSELoss",
}
