// The bf16 model of zero3-bf16-adamw.mlir as ZeRO-1 partitions it: the
// parameters are replicated in bf16, but their f32 masters are sharded with
// the AdamW states, so the step gathers the cast shards once, in one
// collective, and updates only its own master shards.
shard.grid @world(shape = 2)
func.func @train_step(
    %embed: tensor<16xf32> {train.role = #train.role<param>, train.name = "embed.weight", train.init = #train.init<normal, std = 0.02>, train.shard = #train.flat_shard<shape = [8, 4], grid_axes = [0]>},
    %norm: tensor<2xf32> {train.role = #train.role<param>, train.name = "norm.weight", train.init = #train.init<ones>, train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>},
    %head: tensor<16xf32> {train.role = #train.role<param>, train.name = "head.weight", train.init = #train.init<normal, std = 0.02>, train.shard = #train.flat_shard<shape = [8, 4], grid_axes = [0]>},
    %ids: tensor<2x4xi32> {train.role = #train.role<input>, train.name = "input_ids"},
    %labels: tensor<2x4xi32> {train.role = #train.role<label>, train.name = "labels"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 1.0e-3>},
    %step: tensor<i32> {train.role = #train.role<opt_state>, train.name = "optimizer.step", train.init = #train.init<zeros>},
    %embed_m: tensor<16xf32> {train.role = #train.role<opt_state>, train.name = "embed.weight.exp_avg", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [8, 4], grid_axes = [0]>},
    %embed_v: tensor<16xf32> {train.role = #train.role<opt_state>, train.name = "embed.weight.exp_avg_sq", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [8, 4], grid_axes = [0]>},
    %norm_m: tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "norm.weight.exp_avg", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>},
    %norm_v: tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "norm.weight.exp_avg_sq", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>},
    %head_m: tensor<16xf32> {train.role = #train.role<opt_state>, train.name = "head.weight.exp_avg", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [8, 4], grid_axes = [0]>},
    %head_v: tensor<16xf32> {train.role = #train.role<opt_state>, train.name = "head.weight.exp_avg_sq", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [8, 4], grid_axes = [0]>})
    -> (tensor<16xf32> {train.role = #train.role<param>, train.name = "embed.weight"},
        tensor<2xf32> {train.role = #train.role<param>, train.name = "norm.weight"},
        tensor<16xf32> {train.role = #train.role<param>, train.name = "head.weight"},
        tensor<16xf32> {train.role = #train.role<opt_state>, train.name = "embed.weight.exp_avg"},
        tensor<16xf32> {train.role = #train.role<opt_state>, train.name = "embed.weight.exp_avg_sq"},
        tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "norm.weight.exp_avg"},
        tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "norm.weight.exp_avg_sq"},
        tensor<16xf32> {train.role = #train.role<opt_state>, train.name = "head.weight.exp_avg"},
        tensor<16xf32> {train.role = #train.role<opt_state>, train.name = "head.weight.exp_avg_sq"},
        tensor<i32> {train.role = #train.role<opt_state>, train.name = "optimizer.step"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"},
        tensor<f32> {train.role = #train.role<grad_norm_sq>, train.name = "grad_norm_sq"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "zero1", grid = @world, optimizer_states = sharded, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %e16 = train.cast %embed : tensor<16xf32> to tensor<16xbf16>
  %n16 = train.cast %norm : tensor<2xf32> to tensor<2xbf16>
  %h16 = train.cast %head : tensor<16xf32> to tensor<16xbf16>
  %p:3 = train.all_gather_shards %e16, %n16, %h16 on @world grid_axes = [0] : tensor<16xbf16>, tensor<2xbf16>, tensor<16xbf16> -> tensor<8x4xbf16>, tensor<4xbf16>, tensor<8x4xbf16>
  %x = train.embedding %ids, %p#0 : (tensor<2x4xi32>, tensor<8x4xbf16>) -> tensor<2x4x4xbf16>
  %y = train.rms_norm %x, %p#1 : (tensor<2x4x4xbf16>, tensor<4xbf16>) -> tensor<2x4x4xbf16>
  %logits = train.linear %y, %p#2 : (tensor<2x4x4xbf16>, tensor<8x4xbf16>) -> tensor<2x4x8xbf16>
  %loss = train.softmax_cross_entropy %logits, %labels : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %mean = shard.all_reduce %loss on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %dlogits = train.softmax_cross_entropy_grad %logits, %labels : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<2x4x8xbf16>
  %dy = train.linear_grad_input %dlogits, %p#2 : (tensor<2x4x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4x4xbf16>
  %gh = train.linear_grad_weight %dlogits, %y : (tensor<2x4x8xbf16>, tensor<2x4x4xbf16>) -> tensor<8x4xbf16>
  %dx, %gn = train.rms_norm_grad %dy, %x, %p#1 : (tensor<2x4x4xbf16>, tensor<2x4x4xbf16>, tensor<4xbf16>) -> (tensor<2x4x4xbf16>, tensor<4xbf16>)
  %ge = train.embedding_grad %dx, %ids {num_embeddings = 8 : i64} : (tensor<2x4x4xbf16>, tensor<2x4xi32>) -> tensor<8x4xbf16>
  %g:3 = train.reduce_scatter_shards %ge, %gn, %gh on @world grid_axes = [0] reduction = average : tensor<8x4xbf16>, tensor<4xbf16>, tensor<8x4xbf16> -> tensor<16xbf16>, tensor<2xbf16>, tensor<16xbf16>
  %sq = train.sum_of_squares %g#0, %g#1, %g#2 : tensor<16xbf16>, tensor<2xbf16>, tensor<16xbf16>
  %norm_sq = shard.all_reduce %sq on @world grid_axes = [0] : tensor<f32> -> tensor<f32>
  %clip = train.clip_coefficient %norm_sq {max_norm = 1.0 : f32} : tensor<f32>
  %t = train.increment %step : tensor<i32>
  %new_embed, %new_embed_m, %new_embed_v = train.adamw %embed, %g#0, %embed_m, %embed_v, %lr, %t grad_scale %clip {beta2 = 0.95 : f32, weight_decay = 0.1 : f32} : (tensor<16xf32>, tensor<16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  %new_norm, %new_norm_m, %new_norm_v = train.adamw %norm, %g#1, %norm_m, %norm_v, %lr, %t grad_scale %clip {beta2 = 0.95 : f32, weight_decay = 0.0 : f32} : (tensor<2xf32>, tensor<2xbf16>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<i32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
  %new_head, %new_head_m, %new_head_v = train.adamw %head, %g#2, %head_m, %head_v, %lr, %t grad_scale %clip {beta2 = 0.95 : f32, weight_decay = 0.1 : f32} : (tensor<16xf32>, tensor<16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %new_embed, %new_norm, %new_head, %new_embed_m, %new_embed_v, %new_norm_m, %new_norm_v, %new_head_m, %new_head_v, %t, %mean, %norm_sq : tensor<16xf32>, tensor<2xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2xf32>, tensor<2xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i32>, tensor<f32>, tensor<f32>
}
