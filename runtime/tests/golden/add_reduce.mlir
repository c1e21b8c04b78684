module @torchtpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2xf32>) {
    %2 = "stablehlo.add"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %3 = "stablehlo.constant"() {value = dense<0x00000000> : tensor<f32>} : () -> tensor<f32>
    %4 = "stablehlo.reduce"(%2, %3) ({
    ^bb0(%r4_a: tensor<f32>, %r4_b: tensor<f32>):
      %r4_r = "stablehlo.add"(%r4_a, %r4_b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%r4_r) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    "func.return"(%4) : (tensor<2xf32>) -> ()
  }
}
