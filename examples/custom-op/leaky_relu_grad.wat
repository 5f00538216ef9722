;; Reference kernel of leaky_relu_grad, the gradient of leaky_relu. A custom gradient op takes
;; the forward inputs, the forward outputs and the output gradients, and gives one gradient per
;; forward input: dx[i] = dy[i] * (x[i] > 0 ? 1 : alpha).
;; (x, y, dy, dx, n_x, n_y, n_dy, n_dx, alpha) -> ()
(module
  (import "env" "memory" (memory 1 256))
  (func (export "leaky_relu_grad")
    (param $x i32) (param $y i32) (param $dy i32) (param $dx i32)
    (param $nx i32) (param $ny i32) (param $ndy i32) (param $ndx i32) (param $alpha f32)
    (local $i i32) (local $off i32) (local $g f32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $ndx)))
        (local.set $off (i32.shl (local.get $i) (i32.const 2)))
        (local.set $g (f32.load (i32.add (local.get $dy) (local.get $off))))
        (f32.store
          (i32.add (local.get $dx) (local.get $off))
          (select
            (local.get $g)
            (f32.mul (local.get $alpha) (local.get $g))
            (f32.gt (f32.load (i32.add (local.get $x) (local.get $off))) (f32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))))
