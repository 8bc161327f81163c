// main() of every training binary: the driver over the linked step and backend.
#include "driver/Trainer.h"

int main(int argc, char **argv) {
  autoshard::rt::DriverHooks hooks;
  hooks.manifest = autoshard_manifest;
  hooks.step = &autoshard_step;
  // Weak: null unless shard-compile --with-eval linked an evaluation step.
  hooks.evalManifest = autoshard_eval_manifest;
  hooks.evalStep = autoshard_eval_step;
  hooks.initBackend = &autoshard::rt::initBackend;
  hooks.backendName = &autoshard::rt::backendName;
  hooks.createComm = &autoshard::rt::createBackendComm;
  hooks.measurePeakFlopPerS = &autoshard::rt::measurePeakFlopPerS;
  return autoshard::rt::runDriver(argc, argv, hooks);
}
