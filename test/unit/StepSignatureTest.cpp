// Decoding a training step's signature: names, roles and the updated argument.
#include "autoshard/Dialect/Train/IR/StepSignature.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace autoshard::train;

TEST(StepNames, ValidNames) {
  EXPECT_TRUE(isValidStepName("w"));
  EXPECT_TRUE(isValidStepName("h.0.attn.c_attn.weight"));
  EXPECT_TRUE(isValidStepName("fc1_bias.momentum"));
  EXPECT_TRUE(isValidStepName("0"));
}

TEST(StepNames, InvalidNames) {
  EXPECT_FALSE(isValidStepName(""));
  EXPECT_FALSE(isValidStepName(".w"));
  EXPECT_FALSE(isValidStepName("fc 1"));
  EXPECT_FALSE(isValidStepName("w\n"));
  EXPECT_FALSE(isValidStepName("w=1"));
}

static const char *kStep = R"mlir(
func.func @step(
    %w: tensor<4x2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %m: tensor<4x2xf32> {train.role = #train.role<opt_state>, train.name = "w.m"},
    %x: tensor<8x2xf32> {train.role = #train.role<input>, train.name = "x"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4x2xf32> {train.role = #train.role<opt_state>, train.name = "w.m"},
        tensor<4x2xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  return %m, %w, %lr : tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>
}
)mlir";

TEST(StepSignature, DecodesRolesNamesAndUpdates) {
  MLIRContext context;
  context.loadDialect<TrainDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kStep, &context);
  ASSERT_TRUE(module);
  FailureOr<FunctionOpInterface> step = findStepFunction(*module);
  ASSERT_TRUE(succeeded(step));
  StepSignature sig(*step);

  ASSERT_EQ(sig.getArgs().size(), 4u);
  EXPECT_EQ(sig.getArgs()[0].role, Role::Param);
  EXPECT_EQ(sig.getArgs()[0].init.getKind(), InitKind::Normal);
  EXPECT_DOUBLE_EQ(sig.getArgs()[0].init.getValueAsDouble(), 0.5);
  EXPECT_EQ(sig.getArgs()[1].role, Role::OptState);
  EXPECT_FALSE(sig.getArgs()[1].init);
  EXPECT_EQ(sig.getArgs()[2].name, "x");
  EXPECT_EQ(sig.getArgs()[3].type.getRank(), 0);

  // Results name the argument they update, in any order.
  EXPECT_EQ(sig.getUpdatedArg(0), std::optional<unsigned>(1));
  EXPECT_EQ(sig.getUpdatedArg(1), std::optional<unsigned>(0));
  EXPECT_EQ(sig.getUpdatedArg(2), std::nullopt);
  EXPECT_EQ(sig.getArgIndex("lr"), std::optional<unsigned>(3));
  EXPECT_EQ(sig.getArgIndex("nope"), std::nullopt);
}

// Units come from train.unit in order of first appearance among the
// arguments, whatever the names say; params without one are in the root
// unit (-1).
static const char *kUnits = R"mlir(
func.func private @step(
    %a: tensor<2xf32> {train.role = #train.role<param>, train.name = "layers.9.w", train.init = #train.init<zeros>},
    %b: tensor<2xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>, train.unit = "enc.z"},
    %c: tensor<2xf32> {train.role = #train.role<param>, train.name = "c", train.init = #train.init<zeros>, train.unit = "enc.a"},
    %d: tensor<2xf32> {train.role = #train.role<param>, train.name = "d", train.init = #train.init<zeros>, train.unit = "enc.z"},
    %m: tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "b.m"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step}
)mlir";

TEST(StepSignature, UnitsInOrderOfFirstAppearance) {
  MLIRContext context;
  context.loadDialect<TrainDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kUnits, &context);
  ASSERT_TRUE(module);
  // A declaration: the signature alone is what is decoded.
  StepSignature sig(*module->getOps<func::FuncOp>().begin());

  ASSERT_EQ(sig.getUnits().size(), 2u);
  EXPECT_EQ(sig.getUnits()[0], "enc.z");
  EXPECT_EQ(sig.getUnits()[1], "enc.a");
  EXPECT_EQ(sig.getUnitIndex(0), -1); // a numeric name is no unit
  EXPECT_EQ(sig.getUnitIndex(1), 0);
  EXPECT_EQ(sig.getUnitIndex(2), 1);
  EXPECT_EQ(sig.getUnitIndex(3), 0);
  EXPECT_EQ(sig.getUnitIndex(4), -1);
  EXPECT_EQ(sig.getArgs()[3].unit, "enc.z");
  EXPECT_TRUE(sig.getArgs()[0].unit.empty());
}
