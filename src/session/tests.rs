//! In-process session tests on graphs built in code.

use super::*;
use crate::graph::{AttrValue, DataType, NodeSpec, TensorValue};
use crate::tensor::DType;

fn f32_const(name: &str, v: f32) -> NodeSpec {
    NodeSpec::new(name, "Const")
        .attr(
            "value",
            AttrValue::Tensor(TensorValue::from_tensor(&Tensor::scalar(v))),
        )
        .attr("dtype", AttrValue::Type(DataType::Tensor(DType::F32)))
}

fn identity(name: &str, input: &str) -> NodeSpec {
    NodeSpec::new(name, "Identity")
        .input(input, 0)
        .attr("T", AttrValue::Type(DataType::Tensor(DType::F32)))
}

fn placeholder(name: &str) -> NodeSpec {
    NodeSpec::new(name, "Placeholder").attr("dtype", AttrValue::Type(DataType::Tensor(DType::F32)))
}

#[test]
fn smoke_feed_fetch_identity() {
    let g = GraphSpec {
        nodes: vec![
            placeholder("x"),
            identity("y", "x"),
            f32_const("c", 2.5),
            identity("d", "c"),
        ],
    };
    let s = create_session(g, &SessionOptions::default()).unwrap();
    let out = s
        .run_simple(&[("x", Tensor::scalar(1.5f32))], &["y:0", "d"], &[])
        .unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 1.5);
    assert_eq!(out[1].scalar_value::<f32>().unwrap(), 2.5);
    let err = s.run_simple(&[], &["y:0"], &[]).unwrap_err();
    assert!(
        err.message
            .contains("You must feed a value for placeholder tensor 'x'"),
        "{err}"
    );
}
