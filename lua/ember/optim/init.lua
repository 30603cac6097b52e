-- ember.optim: optimizers (one fused C update per parameter), gradient
-- clipping and learning-rate schedules, all with state_dict/load_state_dict.
-- PyTorch's names work too: optim.clip_grad_norm_ (torch.nn.utils'), and
-- optim.lr_scheduler.StepLR and the like (torch.optim.lr_scheduler's).
local optim = {
  Optimizer = require "ember.optim.Optimizer",
  SGD = require "ember.optim.SGD",
  Adam = require "ember.optim.Adam",
  AdamW = require "ember.optim.AdamW",
  RMSprop = require "ember.optim.RMSprop",
  Adagrad = require "ember.optim.Adagrad",
  NAdam = require "ember.optim.NAdam",
  RAdam = require "ember.optim.RAdam",
  Adamax = require "ember.optim.Adamax",
  Adadelta = require "ember.optim.Adadelta",
  Rprop = require "ember.optim.Rprop",
  ASGD = require "ember.optim.ASGD",
  LBFGS = require "ember.optim.LBFGS",
  swa_utils = require "ember.optim.swa_utils",
  Muon = require "ember.optim.Muon",
  Lion = require "ember.optim.Lion",
  Adafactor = require "ember.optim.Adafactor",
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
  MultiplicativeLR = require "ember.optim.MultiplicativeLR",
  LinearLR = require "ember.optim.LinearLR",
  ConstantLR = require "ember.optim.ConstantLR",
  PolynomialLR = require "ember.optim.PolynomialLR",
  CosineAnnealingWarmRestarts = require "ember.optim.CosineAnnealingWarmRestarts",
  OneCycleLR = require "ember.optim.OneCycleLR",
  CyclicLR = require "ember.optim.CyclicLR",
  SequentialLR = require "ember.optim.SequentialLR",
  ChainedScheduler = require "ember.optim.ChainedScheduler",
  ReduceLROnPlateau = require "ember.optim.ReduceLROnPlateau",
}
--- optim.SparseAdam: refused, naming what to use -- ember has no sparse
-- gradients (nn.Embedding refuses sparse = true), so there is nothing for
-- torch.optim.SparseAdam's lazy update to skip: optim.Adam or optim.AdamW
-- update every row.
function optim.SparseAdam()
  require("ember._errors").raise("optim.SparseAdam: ember has no sparse gradients (nn.Embedding refuses "
    .. "sparse = true): use optim.Adam or optim.AdamW, which update every row")
end

optim.clip_grad_norm_ = optim.clip_grad_norm
optim.clip_grad_value_ = optim.clip_grad_value
optim.lr_scheduler = setmetatable({}, { __index = optim })
return optim
