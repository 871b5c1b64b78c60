"""tf.contrib.image's projective transforms: the kernel and its image gradient against TF 2.21's
ImageProjectiveTransformV2 (tests/fixtures/make_image_transform.py), and rotate/translate/compose."""
import json
import os

import numpy as np
import pytest

import actorflow as af

FIX = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "image_transform.json")))
image = af.contrib.image


@pytest.mark.parametrize("i", range(len(FIX["cases"])))
def test_kernel_and_gradient_match_tf(i):
    case = FIX["cases"][i]
    t = np.array(FIX["transforms"], np.float32)
    if case.get("uint8"):
        x = af.constant(np.array(FIX["u8"], np.uint8))
        y = image.transform(x, t[:1], interpolation=case["interpolation"])
        np.testing.assert_array_equal(af.Session().run(y), np.array(case["output"], np.uint8))
        return
    x = af.constant(np.array(FIX["images"], np.float32))
    y = image.transform(x, t, interpolation=case["interpolation"], output_shape=case["output_shape"])
    w = np.arange(int(np.prod(y.shape.as_list())), dtype=np.float32).reshape(y.shape.as_list()) / 100.0
    g, = af.gradients(af.reduce_sum(y * w), [x])
    out, grad = af.Session().run([y, g])
    np.testing.assert_allclose(out, np.array(case["output"]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, np.array(case["grad"]), rtol=1e-4, atol=1e-5)


def test_rotate_translate_and_compose():
    img = np.zeros((5, 5), np.float32)
    img[1, 3] = 1.0
    with af.Session() as s:
        rot = s.run(image.rotate(img, np.pi / 2))                 # counterclockwise about the centre
        assert rot[1, 1] == 1.0 and rot.sum() == 1.0
        moved = s.run(image.translate(img[:, :, None], [1.0, 2.0]))[:, :, 0]
        assert moved[3, 4] == 1.0 and moved.sum() == 1.0
        batch = np.stack([img, img])[..., None]
        both = s.run(image.rotate(batch, [np.pi / 2, -np.pi / 2]))
        assert both[0, 1, 1, 0] == 1.0 and both[1, 3, 3, 0] == 1.0
        t = image.compose_transforms(image.angles_to_projective_transforms(np.pi / 2, 5, 5),
                                     image.angles_to_projective_transforms(-np.pi / 2, 5, 5))
        np.testing.assert_allclose(s.run(t), [[1, 0, 0, 0, 1, 0, 0, 0]], atol=1e-6)
    with pytest.raises(ValueError, match="interpolation"):
        image.transform(img, [1, 0, 0, 0, 1, 0, 0, 0], interpolation="CUBIC")
