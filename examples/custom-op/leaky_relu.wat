;; Reference kernel of the custom op leaky_relu: y[i] = x[i] > 0 ? x[i] : alpha * x[i].
;; tilegraph's calling convention: pointers to the inputs and outputs (float32 arrays in the
;; imported memory), their element counts, then the attributes: (x, y, n_x, n_y, alpha) -> ().
(module
  (import "env" "memory" (memory 1 256))
  (func (export "leaky_relu")
    (param $x i32) (param $y i32) (param $nx i32) (param $ny i32) (param $alpha f32)
    (local $i i32) (local $v f32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $ny)))
        (local.set $v (f32.load (i32.add (local.get $x) (i32.shl (local.get $i) (i32.const 2)))))
        (f32.store
          (i32.add (local.get $y) (i32.shl (local.get $i) (i32.const 2)))
          (select (local.get $v) (f32.mul (local.get $alpha) (local.get $v)) (f32.gt (local.get $v) (f32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))))
