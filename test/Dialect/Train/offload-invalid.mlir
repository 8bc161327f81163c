// The rules of offloaded steps (train.memory, train.on_host and the
// transfer ops), one case per diagnostic of the step verifier and of the
// transfer ops' verifiers.
// RUN: shard-opt -split-input-file -verify-diagnostics %s

// A hyper in host memory.
// expected-error@+1 {{argument #2 (hyper "l") is in host memory; only parameters and optimizer states are offloaded}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>, train.memory = #train.memory<host>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<host>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// The update of a host state returned as a device tensor.
// expected-error@+1 {{result #1 ("w.momentum_buffer") is in device memory but the argument it updates is in host memory}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<device>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %m2 = train.to_device %m : tensor<3xf32>
  return %w, %m2, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A device op reads a host tensor.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<host>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.relu' op reads operand #0 from host memory but an op on the device reads device memory}}
  %r = train.relu %m : tensor<3xf32>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A host op reads a device tensor.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<host>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.relu' op reads operand #0 from device memory but an op on the host reads host memory}}
  %r = train.relu %w {train.on_host} : tensor<3xf32>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A host tensor copied to the host.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<host>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.to_host' op reads operand #0 from host memory but a copy to the host reads device memory}}
  %c = train.to_host %m : tensor<3xf32>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A device tensor copied to the device.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<host>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.to_device' op reads operand #0 from device memory but a copy to the device reads host memory}}
  %c = train.to_device %w : tensor<3xf32>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A host op reads an NVMe argument directly.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<nvme>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<nvme>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %r = train.nvme_read %m : tensor<3xf32>
  %w2 = train.nvme_write %r to %m : tensor<3xf32>
  // expected-error@+1 {{'train.relu' op reads argument #1 ("w.momentum_buffer"), which is in an NVMe file; read it with train.nvme_read}}
  %x = train.relu %m {train.on_host} : tensor<3xf32>
  return %w, %w2, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// An NVMe read of a tensor in host memory.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<host>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.nvme_read' op reads operand #0 from host memory but an NVMe read reads an NVMe file}}
  %r = train.nvme_read %m : tensor<3xf32>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// An NVMe write of a device tensor.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<nvme>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<nvme>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.nvme_write' op reads operand #0 from device memory but an NVMe write reads host memory}}
  %w2 = train.nvme_write %w to %m : tensor<3xf32>
  return %w, %w2, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// An NVMe result returned without a write.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<nvme>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<nvme>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %r = train.nvme_read %m : tensor<3xf32>
  // expected-error@+1 {{'func.return' op returns result #1, which is kept in an NVMe file, from something other than a train.nvme_write to the argument it updates}}
  return %w, %r, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// The result of an NVMe write read by an op.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<nvme>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<nvme>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %r = train.nvme_read %m : tensor<3xf32>
  %w2 = train.nvme_write %r to %m : tensor<3xf32>
  // expected-error@+1 {{'train.relu' op reads the result of a train.nvme_write; only the step's return may (read the written value instead)}}
  %x = train.relu %w2 {train.on_host} : tensor<3xf32>
  return %w, %w2, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A collective on the host.
shard.grid @world(shape = 2)
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<host>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %h = train.to_host %l : tensor<f32>
  // expected-error@+1 {{'shard.all_reduce' op is a collective marked train.on_host; collectives run on the device}}
  %a = shard.all_reduce %h on @world grid_axes = [0] reduction = average {train.on_host} : tensor<f32> -> tensor<f32>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// train.memory of another kind.
// expected-error@+1 {{argument #1: 'train.memory' must be a #train.memory attribute}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = "host"},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// train.on_host with a value.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %c = train.to_host %w : tensor<3xf32>
  // expected-error@+1 {{'train.on_host' is a unit attribute of a train op}}
  %r = train.relu %c {train.on_host = 1 : i32} : tensor<3xf32>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// An NVMe read of a computed value.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %c = train.to_host %w : tensor<3xf32>
  // expected-error@+1 {{'train.nvme_read' op source must be an argument of the function: an NVMe file holds a step's argument}}
  %r = train.nvme_read %c : tensor<3xf32>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// An asynchronous copy to the device of a device tensor.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<host>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<host>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.transfer_start' op reads operand #0 from device memory but a copy to the device reads host memory}}
  %h = train.transfer_start to_device %w : tensor<3xf32> -> !train.pending<tensor<3xf32>>
  %c = train.transfer_wait %h : !train.pending<tensor<3xf32>>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// An NVMe write without the argument it writes.
func.func @f(%c: tensor<3xf32>) {
  // expected-error@+1 {{'train.transfer_start' op nvme_write needs the NVMe argument it writes ('to' TARGET)}}
  %h = train.transfer_start nvme_write %c : tensor<3xf32> -> !train.pending<tensor<3xf32>>
  %d = train.transfer_wait %h : !train.pending<tensor<3xf32>>
  return
}

// -----

// A copy with a target.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %c = train.to_host %w : tensor<3xf32>
  // expected-error@+1 {{'train.transfer_start' op to_device takes no target}}
  %h = train.transfer_start to_device %c to %w : tensor<3xf32> : tensor<3xf32> -> !train.pending<tensor<3xf32>>
  %d = train.transfer_wait %h : !train.pending<tensor<3xf32>>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A handle of another type.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.transfer_start' op yields one tensor of its input's type 'tensor<3xf32>'; the handle has '!train.pending<tensor<4xf32>>'}}
  %h = train.transfer_start to_host %w : tensor<3xf32> -> !train.pending<tensor<4xf32>>
  %c = train.transfer_wait %h : !train.pending<tensor<4xf32>>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A start without its wait.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.transfer_start' op needs exactly one train.transfer_wait of its handle}}
  %h = train.transfer_start to_host %w : tensor<3xf32> -> !train.pending<tensor<3xf32>>
  return %w, %m, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// A transfer wait of a handle that no transfer started.
func.func @f(%h: !train.pending<tensor<3xf32>>) {
  // expected-error@+1 {{'train.transfer_wait' op waits a handle that no train.transfer_start returned}}
  %c = train.transfer_wait %h : !train.pending<tensor<3xf32>>
  return
}

// -----

// An NVMe result returned from an asynchronous read.
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %m: tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.init = #train.init<zeros>, train.memory = #train.memory<nvme>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<3xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum_buffer", train.memory = #train.memory<nvme>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %h = train.transfer_start nvme_read %m : tensor<3xf32> -> !train.pending<tensor<3xf32>>
  %r = train.transfer_wait %h : !train.pending<tensor<3xf32>>
  // expected-error@+1 {{'func.return' op returns result #1, which is kept in an NVMe file, from something other than a train.nvme_write to the argument it updates}}
  return %w, %r, %l : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}
