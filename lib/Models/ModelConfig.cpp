//===- ModelConfig.cpp - named transformer configs, checks, counts --------===//

#include "autoshard/Models/ModelConfig.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace autoshard::models;
using llvm::StringRef;

StringRef autoshard::models::stringifyModelFamily(ModelFamily family) {
  return family == ModelFamily::GPT2 ? "gpt2" : "llama";
}

StringRef autoshard::models::stringifyOptimizerKind(OptimizerKind kind) {
  return kind == OptimizerKind::AdamW ? "adamw" : "sgd";
}

StringRef autoshard::models::stringifyPrecision(Precision precision) {
  return precision == Precision::F32 ? "f32" : "bf16";
}

std::optional<ModelFamily> autoshard::models::parseModelFamily(StringRef name) {
  return llvm::StringSwitch<std::optional<ModelFamily>>(name)
      .Case("gpt2", ModelFamily::GPT2)
      .Case("llama", ModelFamily::Llama)
      .Default(std::nullopt);
}

std::optional<OptimizerKind>
autoshard::models::parseOptimizerKind(StringRef name) {
  return llvm::StringSwitch<std::optional<OptimizerKind>>(name)
      .Case("adamw", OptimizerKind::AdamW)
      .Case("sgd", OptimizerKind::SGD)
      .Default(std::nullopt);
}

std::optional<Precision> autoshard::models::parsePrecision(StringRef name) {
  return llvm::StringSwitch<std::optional<Precision>>(name)
      .Case("f32", Precision::F32)
      .Case("bf16", Precision::BF16)
      .Default(std::nullopt);
}

//===----------------------------------------------------------------------===//
// Named configurations
//===----------------------------------------------------------------------===//

ModelConfig autoshard::models::getFamilyDefaults(ModelFamily family) {
  ModelConfig c;
  c.family = family;
  c.normEps = 1e-5;
  c.optimizer = OptimizerKind::AdamW;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.eps = 1e-8;
  c.weightDecay = 0.1;
  c.maxGradNorm = 1.0;
  c.precision = Precision::F32;
  if (family == ModelFamily::GPT2) {
    c.tieEmbeddings = true;
    c.lr = 6e-4;
  } else {
    c.tieEmbeddings = false;
    c.ropeTheta = 10000.0;
    c.lr = 3e-4;
  }
  return c;
}

namespace {

/// GPT-2's architecture (Radford et al. 2019; GPT-3 reuses it): learned
/// positions, pre-norm blocks, a 4x GELU MLP, tied output projection. A step
/// covers the whole context window.
ModelConfig gpt2(StringRef name, int64_t layers, int64_t hidden, int64_t heads,
                 int64_t maxPositions) {
  ModelConfig c = getFamilyDefaults(ModelFamily::GPT2);
  c.name = name.str();
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kvHeads = heads;
  c.ffn = 4 * hidden;
  c.vocab = 50257;
  c.maxPositions = maxPositions;
  c.seq = maxPositions;
  c.microBatch = 1;
  return c;
}

/// Llama 2's architecture (Touvron et al. 2023): RMSNorm, rotary positions,
/// SwiGLU, untied output projection, 4096-token context.
ModelConfig llama2(StringRef name, int64_t layers, int64_t hidden,
                   int64_t heads, int64_t kvHeads, int64_t ffn) {
  ModelConfig c = getFamilyDefaults(ModelFamily::Llama);
  c.name = name.str();
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kvHeads = kvHeads;
  c.ffn = ffn;
  c.vocab = 32000;
  c.seq = 4096;
  c.microBatch = 1;
  return c;
}

/// The 1T-parameter GPT of Megatron-LM's scaling study (Narayanan et al.
/// 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
/// Using Megatron-LM", Table 1: 128 layers, hidden 25600, 160 heads,
/// 1008B parameters), with its 51200-row vocabulary (GPT-2's, padded).
ModelConfig megatron1t() {
  ModelConfig c = gpt2("megatron-1t", 128, 25600, 160, 2048);
  c.vocab = 51200;
  return c;
}

/// A model small enough to train on a CPU in a test: byte-level vocabulary,
/// a batch that 1, 2, 4 and 8 ranks can split.
ModelConfig tiny(ModelConfig c) {
  c.vocab = 256;
  c.seq = 64;
  c.microBatch = 8;
  c.lr = 1e-3;
  return c;
}

std::vector<ModelConfig> buildNamedConfigs() {
  return {
      gpt2("gpt2-small", 12, 768, 12, 1024),
      gpt2("gpt2-medium", 24, 1024, 16, 1024),
      gpt2("gpt2-large", 36, 1280, 20, 1024),
      gpt2("gpt2-xl", 48, 1600, 25, 1024),
      gpt2("gpt3-175b", 96, 12288, 96, 2048),
      megatron1t(),
      llama2("llama2-7b", 32, 4096, 32, 32, 11008),
      llama2("llama2-13b", 40, 5120, 40, 40, 13824),
      llama2("llama2-70b", 80, 8192, 64, 8, 28672),
      tiny(gpt2("gpt2-tiny", 2, 64, 4, 128)),
      tiny(llama2("llama-tiny", 2, 64, 4, 2, 128)),
  };
}

const std::vector<ModelConfig> &namedConfigs() {
  static const std::vector<ModelConfig> configs = buildNamedConfigs();
  return configs;
}

} // namespace

llvm::ArrayRef<StringRef> autoshard::models::getModelConfigNames() {
  static const std::vector<StringRef> names = [] {
    std::vector<StringRef> result;
    for (const ModelConfig &c : namedConfigs())
      result.push_back(c.name);
    return result;
  }();
  return names;
}

std::optional<ModelConfig>
autoshard::models::lookupModelConfig(StringRef name) {
  for (const ModelConfig &c : namedConfigs())
    if (c.name == name)
      return c;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

static llvm::Error configError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static std::string formatDouble(double value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%g", value);
  return text;
}

/// The closed parameter formula: in int64_t for countParameters, and in double,
/// which cannot overflow, for verification to reject configs whose int64
/// count would.
template <typename Number>
static Number parameterFormula(const ModelConfig &c) {
  Number layers = c.layers, hidden = c.hidden, vocab = c.vocab, ffn = c.ffn;
  Number embedding = vocab * hidden;
  Number outputProjection = c.tieEmbeddings ? Number(0) : vocab * hidden;
  if (c.family == ModelFamily::GPT2) {
    Number positions = Number(c.maxPositions) * hidden;
    // q, k, v and the output projection, each with a bias.
    Number attention = 4 * (hidden * hidden + hidden);
    // c_fc [ffn, hidden] + [ffn], c_proj [hidden, ffn] + [hidden].
    Number mlp = 2 * ffn * hidden + ffn + hidden;
    Number norms = 2 * (2 * hidden); // ln_1, ln_2: weight and bias
    Number finalNorm = 2 * hidden;
    return embedding + positions + layers * (attention + mlp + norms) +
           finalNorm + outputProjection;
  }
  Number headDim = c.heads > 0 ? Number(c.hidden / c.heads) : Number(0);
  Number queryWidth = Number(c.heads) * headDim;
  Number kvWidth = Number(c.kvHeads) * headDim;
  // q_proj, k_proj, v_proj, o_proj: no biases.
  Number attention = 2 * queryWidth * hidden + 2 * kvWidth * hidden;
  Number mlp = 3 * ffn * hidden; // gate, up, down
  Number norms = 2 * hidden;     // input and post-attention RMSNorm
  Number finalNorm = hidden;
  return embedding + layers * (attention + mlp + norms) + finalNorm +
         outputProjection;
}

llvm::Error autoshard::models::verifyModelConfig(const ModelConfig &c) {
  bool gpt2 = c.family == ModelFamily::GPT2;
  struct Size {
    StringRef name;
    int64_t value;
  };
  llvm::SmallVector<Size> sizes = {
      {"layers", c.layers}, {"hidden", c.hidden},
      {"heads", c.heads},   {"kv-heads", c.kvHeads},
      {"ffn", c.ffn},       {"vocab", c.vocab},
      {"seq", c.seq},       {"micro-batch", c.microBatch}};
  if (gpt2)
    sizes.push_back({"max-positions", c.maxPositions});
  for (const Size &size : sizes)
    if (size.value <= 0)
      return configError(size.name + " must be positive, got " +
                         llvm::Twine(size.value));

  if (c.hidden % c.heads != 0)
    return configError("hidden " + llvm::Twine(c.hidden) +
                       " is not a multiple of heads " + llvm::Twine(c.heads) +
                       "; each head gets hidden / heads channels");
  if (gpt2 && c.kvHeads != c.heads)
    return configError("gpt2 uses multi-head attention: kv-heads must equal "
                       "heads " +
                       llvm::Twine(c.heads) + ", got " +
                       llvm::Twine(c.kvHeads));
  if (c.heads % c.kvHeads != 0)
    return configError("heads " + llvm::Twine(c.heads) +
                       " is not a multiple of kv-heads " +
                       llvm::Twine(c.kvHeads) +
                       "; each key/value head serves heads / kv-heads query "
                       "heads");
  if (gpt2) {
    if (c.seq > c.maxPositions)
      return configError("seq " + llvm::Twine(c.seq) +
                         " exceeds max-positions " +
                         llvm::Twine(c.maxPositions) +
                         ", the rows of the learned position table wpe");
  } else {
    if (c.headDim() % 2 != 0)
      return configError("head size " + llvm::Twine(c.headDim()) + " (hidden " +
                         llvm::Twine(c.hidden) + " / heads " +
                         llvm::Twine(c.heads) +
                         ") is odd; rope rotates pairs of channels and needs "
                         "an even head size");
    if (c.maxPositions != 0)
      return configError("llama has no learned position table; max-positions "
                         "must be 0, got " +
                         llvm::Twine(c.maxPositions));
    if (!std::isfinite(c.ropeTheta) || c.ropeTheta <= 0.0)
      return configError("rope-theta must be finite and > 0, got " +
                         formatDouble(c.ropeTheta));
  }
  // Token ids are i32 tensors.
  if (c.vocab > std::numeric_limits<int32_t>::max())
    return configError("vocab " + llvm::Twine(c.vocab) + " exceeds " +
                       llvm::Twine(std::numeric_limits<int32_t>::max()) +
                       ", the most token ids an i32 input can address");
  if (!std::isfinite(c.normEps) || c.normEps <= 0.0)
    return configError("norm-eps must be finite and > 0, got " +
                       formatDouble(c.normEps));

  // Element counts are int64: keep a wide margin below 2^63 for the
  // parameter total and for the largest activation, the logits (or the
  // feed-forward hidden state).
  const double limit = std::ldexp(1.0, 62);
  double parameters = parameterFormula<double>(c);
  if (parameters >= limit)
    return configError("the model would have about " +
                       formatDouble(parameters) +
                       " parameters, more than the 2^62 an int64 count "
                       "safely holds");
  if (c.gradAccum < 1)
    return configError("grad-accum must be at least 1, got " +
                       llvm::Twine(c.gradAccum));
  double positions = double(c.batchRows()) * double(c.seq);
  double widest =
      positions * double(std::max({c.vocab, c.ffn, c.hidden, c.heads}));
  if (widest >= limit)
    return configError("micro-batch " + llvm::Twine(c.microBatch) + " x seq " +
                       llvm::Twine(c.seq) + " makes activations of about " +
                       formatDouble(widest) +
                       " elements, more than the 2^62 an int64 size safely "
                       "holds");

  // The same rules as #train.adamw / #train.sgd, stated in flag terms.
  if (!std::isfinite(c.lr) || c.lr <= 0.0)
    return configError("lr must be finite and > 0, got " + formatDouble(c.lr));
  if (!std::isfinite(c.weightDecay) || c.weightDecay < 0.0)
    return configError("weight-decay must be finite and >= 0, got " +
                       formatDouble(c.weightDecay));
  if (c.optimizer == OptimizerKind::AdamW) {
    for (auto [name, beta] :
         {std::pair<StringRef, double>{"beta1", c.beta1}, {"beta2", c.beta2}})
      if (!(beta >= 0.0 && beta < 1.0))
        return configError(name + " must lie in [0, 1), got " +
                           formatDouble(beta));
    if (!std::isfinite(c.eps) || c.eps <= 0.0)
      return configError("eps must be finite and > 0, got " +
                         formatDouble(c.eps));
  } else if (!std::isfinite(c.momentum) || c.momentum < 0.0) {
    return configError("momentum must be finite and >= 0, got " +
                       formatDouble(c.momentum));
  }
  if (!std::isfinite(c.maxGradNorm) || c.maxGradNorm < 0.0)
    return configError("max-grad-norm must be finite and >= 0 (0 disables "
                       "clipping), got " +
                       formatDouble(c.maxGradNorm));
  return llvm::Error::success();
}

int64_t autoshard::models::countParameters(const ModelConfig &config) {
  return parameterFormula<int64_t>(config);
}
