-- ember.optim: optimizers (one fused C update per parameter), gradient
-- clipping and learning-rate schedules, all with state_dict/load_state_dict.
return {
  Optimizer = require "ember.optim.Optimizer",
  SGD = require "ember.optim.SGD",
  Adam = require "ember.optim.Adam",
  AdamW = require "ember.optim.AdamW",
  clip_grad_norm = require "ember.optim.clip_grad_norm",
  Scheduler = require "ember.optim.Scheduler",
  WarmupCosine = require "ember.optim.WarmupCosine",
  WarmupLinear = require "ember.optim.WarmupLinear",
  StepLR = require "ember.optim.StepLR",
  MultiStepLR = require "ember.optim.MultiStepLR",
  ExponentialLR = require "ember.optim.ExponentialLR",
  CosineAnnealingLR = require "ember.optim.CosineAnnealingLR",
  LambdaLR = require "ember.optim.LambdaLR",
  ReduceLROnPlateau = require "ember.optim.ReduceLROnPlateau",
}
