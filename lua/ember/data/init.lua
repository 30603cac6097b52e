-- ember.data: datasets, batching, padding, tokenizers and the readers of
-- the data sets the example scripts train on.
return {
  Dataset = require "ember.data.dataset",
  -- torch.utils.data's: TensorDataset(x, y), DataLoader(ds, {batch_size =, shuffle =, ...})
  TensorDataset = require "ember.data.tensor_dataset",
  DataLoader = require "ember.data.dataloader",
  default_collate = (require "ember.data.dataloader").default_collate,
  Vocab = require "ember.data.vocab",
  CharTokenizer = require "ember.data.char_tokenizer",
  WordTokenizer = require "ember.data.word_tokenizer",
  padding = require "ember.data.padding",
  pad = (require "ember.data.padding").pad,
  packing = require "ember.data.packing",
  pack = (require "ember.data.packing").pack,
  text = require "ember.data.text",
  Rng = require "ember.data.rng",
  source = require "ember.data.source",
  wordlists = require "ember.data.wordlists",
  fashion_mnist = require "ember.data.fashion_mnist",
  kjv = require "ember.data.kjv",
  addition = require "ember.data.addition",
  sort_of_clevr = require "ember.data.sort_of_clevr",
  naive_bayes = require "ember.data.naive_bayes",
}
