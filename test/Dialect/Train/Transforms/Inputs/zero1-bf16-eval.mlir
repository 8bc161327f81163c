// The evaluation step of zero1-bf16-adamw.mlir (shard-opt --forward-only):
// the same f32 master shards, cast and gathered, and the loss; no
// optimizer, no states.
shard.grid @world(shape = 2)
func.func @train_step(
    %embed: tensor<16xf32> {train.role = #train.role<param>, train.name = "embed.weight", train.init = #train.init<normal, std = 0.02>, train.shard = #train.flat_shard<shape = [8, 4], grid_axes = [0]>},
    %norm: tensor<2xf32> {train.role = #train.role<param>, train.name = "norm.weight", train.init = #train.init<ones>, train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>},
    %head: tensor<16xf32> {train.role = #train.role<param>, train.name = "head.weight", train.init = #train.init<normal, std = 0.02>, train.shard = #train.flat_shard<shape = [8, 4], grid_axes = [0]>},
    %ids: tensor<2x4xi32> {train.role = #train.role<input>, train.name = "input_ids"},
    %labels: tensor<2x4xi32> {train.role = #train.role<label>, train.name = "labels"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
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
  return %mean : tensor<f32>
}
