-- ember.optim: optimizers (one fused C update per parameter), gradient
-- clipping and learning-rate schedules, all with state_dict/load_state_dict.
return {
  Optimizer = require "ember.optim.Optimizer",
  SGD = require "ember.optim.SGD",
  Adam = require "ember.optim.Adam",
  AdamW = require "ember.optim.AdamW",
  RMSprop = require "ember.optim.RMSprop",
  Adagrad = require "ember.optim.Adagrad",
  clip_grad_norm = require "ember.optim.clip_grad_norm",
  clip_grad_value = require "ember.optim.clip_grad_value",
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
