-- ember.distributions: torch.distributions (PyTorch 1.13's API) on ember's
-- tensor ops -- each class in its own file on distributions.Distribution;
-- kl_divergence and register_kl from kl.lua; constraints.
-- `require "ember.distributions"` or `ember.distributions` (loaded lazily).
local distributions = {
  Distribution = require "ember.distributions.Distribution",
  Normal = require "ember.distributions.Normal",
  Uniform = require "ember.distributions.Uniform",
  Bernoulli = require "ember.distributions.Bernoulli",
  Categorical = require "ember.distributions.Categorical",
  OneHotCategorical = require "ember.distributions.OneHotCategorical",
  Binomial = require "ember.distributions.Binomial",
  Exponential = require "ember.distributions.Exponential",
  Laplace = require "ember.distributions.Laplace",
  LogNormal = require "ember.distributions.LogNormal",
  Gumbel = require "ember.distributions.Gumbel",
  Cauchy = require "ember.distributions.Cauchy",
  Poisson = require "ember.distributions.Poisson",
  Gamma = require "ember.distributions.Gamma",
  Beta = require "ember.distributions.Beta",
  Dirichlet = require "ember.distributions.Dirichlet",
  StudentT = require "ember.distributions.StudentT",
  Chi2 = require "ember.distributions.Chi2",
  HalfCauchy = require "ember.distributions.HalfCauchy",
  Multinomial = require "ember.distributions.Multinomial",
  NegativeBinomial = require "ember.distributions.NegativeBinomial",
  Pareto = require "ember.distributions.Pareto",
  Weibull = require "ember.distributions.Weibull",
  ContinuousBernoulli = require "ember.distributions.ContinuousBernoulli",
  VonMises = require "ember.distributions.VonMises",
  FisherSnedecor = require "ember.distributions.FisherSnedecor",
  Kumaraswamy = require "ember.distributions.Kumaraswamy",
  HalfNormal = require "ember.distributions.HalfNormal",
  Geometric = require "ember.distributions.Geometric",
  MultivariateNormal = require "ember.distributions.MultivariateNormal",
  LowRankMultivariateNormal = require "ember.distributions.LowRankMultivariateNormal",
  Independent = require "ember.distributions.Independent",
  TransformedDistribution = require "ember.distributions.TransformedDistribution",
  MixtureSameFamily = require "ember.distributions.MixtureSameFamily",
  RelaxedBernoulli = require "ember.distributions.RelaxedBernoulli",
  RelaxedOneHotCategorical = require "ember.distributions.RelaxedOneHotCategorical",
  transforms = require "ember.distributions.transforms",
  constraints = require "ember.distributions.constraints",
}
distributions.LogitRelaxedBernoulli = distributions.RelaxedBernoulli.LogitRelaxedBernoulli
distributions.ExpRelaxedCategorical = distributions.RelaxedOneHotCategorical.ExpRelaxedCategorical
-- the transforms by name too, as torch.distributions has them (D.AffineTransform)
for name, f in pairs(distributions.transforms) do
  if name:find("Transform$") then distributions[name] = f end
end
require("ember.distributions._mode")(distributions) -- each class's mode
local kl = require "ember.distributions.kl"
kl._register_all()
distributions.kl = kl
distributions.kl_divergence = kl.kl_divergence
distributions.register_kl = kl.register_kl
return distributions
