"""CPU kernels of the box ops (graph/ops/image_boxes_ops.py): CropAndResize and its two gradients,
the non-max suppressions (NonMaxSuppressionV3/V4/V5, NonMaxSuppressionWithOverlaps,
CombinedNonMaxSuppression) and DrawBoundingBoxesV2, each following TF's kernel
(crop_and_resize_op.cc, non_max_suppression_op.cc, draw_bounding_box_op.cc) step for step, in
float32 as TF computes them.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

_F = np.float32


# ---------------------------------------------------------------------------------------------
# CropAndResize

def _check_crop(op, image, boxes, box_ind, crop_size=None):
    image, boxes, box_ind = np.asarray(image), np.asarray(boxes), np.asarray(box_ind)
    if image.ndim != 4:
        raise InvalidArgumentError(f"{op}: input image must be 4-D, got shape {list(image.shape)}")
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise InvalidArgumentError(f"{op}: boxes must be 2-D [num_boxes, 4], got shape {list(boxes.shape)}")
    if box_ind.shape != (boxes.shape[0],):
        raise InvalidArgumentError(f"{op}: box_index has incompatible shape {list(box_ind.shape)} for "
                                   f"{boxes.shape[0]} boxes")
    if box_ind.size and (box_ind.min() < 0 or box_ind.max() >= image.shape[0]):
        raise InvalidArgumentError(f"{op}: box_index has values outside [0, batch_size) ({image.shape[0]})")
    if crop_size is not None:
        cs = np.asarray(crop_size).reshape(-1)
        if cs.shape != (2,) or cs.min() <= 0:
            raise InvalidArgumentError(f"{op}: crop_size must be two positive elements, got {cs.tolist()}")
    return image, boxes.astype(_F), box_ind


def _axis(lo, hi, crop, size):
    """TF's in-image coordinates of a crop axis (float32) and whether each is inside."""
    if crop > 1:
        scale = (hi - lo) * _F(size - 1) / _F(crop - 1)
        pos = lo * _F(size - 1) + np.arange(crop, dtype=_F) * scale
    else:
        pos = np.full(crop, _F(0.5) * (lo + hi) * _F(size - 1), _F)
    pos = pos.astype(_F)
    inside = (pos >= 0) & (pos <= size - 1)
    return pos, inside


def _crop_forward_cost(image, boxes, box_ind, crop_size) -> int:
    cs = np.asarray(crop_size).reshape(-1)
    return 8 * int(np.shape(boxes)[0]) * int(np.prod(cs)) * int(np.shape(image)[-1]) if cs.size == 2 else 0


@register_kernel("CropAndResize", "CPU", cost=_crop_forward_cost)
def crop_and_resize_kernel(attrs):
    method = attrs.get("method", "bilinear")
    extrap = _F(attrs.get("extrapolation_value", 0.0))

    def fn(image, boxes, box_ind, crop_size):
        image, boxes, box_ind = _check_crop("CropAndResize", image, boxes, box_ind, crop_size)
        ch, cw = (int(v) for v in np.asarray(crop_size).reshape(-1))
        _, h, w, d = image.shape
        out = np.full((boxes.shape[0], ch, cw, d), extrap, _F)
        for b in range(boxes.shape[0]):
            y1, x1, y2, x2 = boxes[b]
            img = image[box_ind[b]].astype(_F)
            ys, yin = _axis(y1, y2, ch, h)
            xs, xin = _axis(x1, x2, cw, w)
            if method == "bilinear":
                ty, by = np.floor(ys).astype(int), np.ceil(ys).astype(int)
                lx, rx = np.floor(xs).astype(int), np.ceil(xs).astype(int)
                ty, by = np.clip(ty, 0, h - 1), np.clip(by, 0, h - 1)
                lx, rx = np.clip(lx, 0, w - 1), np.clip(rx, 0, w - 1)
                yl = (ys - np.floor(ys)).astype(_F)[:, None, None]
                xl = (xs - np.floor(xs)).astype(_F)[None, :, None]
                tl, tr = img[ty][:, lx], img[ty][:, rx]
                bl, br = img[by][:, lx], img[by][:, rx]
                top = tl + (tr - tl) * xl
                bottom = bl + (br - bl) * xl
                val = top + (bottom - top) * yl
            else:
                cy = np.clip(np.floor(ys + _F(0.5)).astype(int), 0, h - 1)      # roundf: halves away from 0
                cx = np.clip(np.floor(xs + _F(0.5)).astype(int), 0, w - 1)
                val = img[cy][:, cx]
            mask = yin[:, None] & xin[None, :]
            out[b][mask] = val[mask]
        return out
    return fn


def _crop_cost(grads, *rest):
    return 8 * int(np.size(grads))


@register_kernel("CropAndResizeGradImage", "CPU", cost=_crop_cost)
def crop_and_resize_grad_image_kernel(attrs):
    method = attrs.get("method", "bilinear")
    dtype = np.dtype(attrs.get("T", np.float32))

    def fn(grads, boxes, box_ind, image_size):
        size = [int(v) for v in np.asarray(image_size).reshape(-1)]
        if len(size) != 4 or min(size) <= 0:
            raise InvalidArgumentError(f"CropAndResizeGradImage: image_size must be 4 positive elements, got {size}")
        grads = np.asarray(grads, _F)
        _, boxes, box_ind = _check_crop("CropAndResizeGradImage", np.empty((size[0], 1, 1, 1), np.int8), boxes,
                                        box_ind)
        _, h, w, d = size
        out = np.zeros(size, dtype)
        _, ch, cw, _ = grads.shape
        for b in range(boxes.shape[0]):
            y1, x1, y2, x2 = boxes[b]
            ys, yin = _axis(y1, y2, ch, h)
            xs, xin = _axis(x1, x2, cw, w)
            if not yin.any() or not xin.any():
                continue
            ys, xs = ys[yin], xs[xin]
            g = grads[b][yin][:, xin]                       # [ny, nx, d]
            acc = out[box_ind[b]]
            # np.add.at visits the pixels in TF's order (rows, then columns), so the float sums agree.
            if method == "bilinear":
                ty, by = np.floor(ys).astype(int), np.ceil(ys).astype(int)
                lx, rx = np.floor(xs).astype(int), np.ceil(xs).astype(int)
                yl = (ys - ty).astype(_F)[:, None, None]
                xl = (xs - lx).astype(_F)[None, :, None]
                top, bottom = (_F(1) - yl) * g, yl * g
                for rows, part in ((ty, top), (by, bottom)):
                    np.add.at(acc, (rows[:, None], lx[None, :]), ((_F(1) - xl) * part).astype(dtype))
                    np.add.at(acc, (rows[:, None], rx[None, :]), (xl * part).astype(dtype))
            else:
                cy = np.floor(ys + _F(0.5)).astype(int)
                cx = np.floor(xs + _F(0.5)).astype(int)
                np.add.at(acc, (cy[:, None], cx[None, :]), g.astype(dtype))
        return out
    return fn


@register_kernel("CropAndResizeGradBoxes", "CPU", cost=_crop_cost)
def crop_and_resize_grad_boxes_kernel(attrs):
    def fn(grads, image, boxes, box_ind):
        image, boxes, box_ind = _check_crop("CropAndResizeGradBoxes", image, boxes, box_ind)
        grads = np.asarray(grads, _F)
        _, h, w, _ = image.shape
        _, ch, cw, _ = grads.shape
        out = np.zeros((boxes.shape[0], 4), np.float64)
        hr = _F(h - 1) / _F(ch - 1) if ch > 1 else _F(0)
        wr = _F(w - 1) / _F(cw - 1) if cw > 1 else _F(0)
        for b in range(boxes.shape[0]):
            y1, x1, y2, x2 = boxes[b]
            ys, yin = _axis(y1, y2, ch, h)
            xs, xin = _axis(x1, x2, cw, w)
            if not yin.any() or not xin.any():
                continue
            yi, xi = np.nonzero(yin)[0], np.nonzero(xin)[0]
            ys, xs = ys[yin], xs[xin]
            img = image[box_ind[b]].astype(_F)
            ty, by = np.floor(ys).astype(int), np.ceil(ys).astype(int)
            lx, rx = np.floor(xs).astype(int), np.ceil(xs).astype(int)
            yl = (ys - ty).astype(_F)[:, None, None]
            xl = (xs - lx).astype(_F)[None, :, None]
            tl, tr = img[ty][:, lx], img[ty][:, rx]
            bl, br = img[by][:, lx], img[by][:, rx]
            g = grads[b][yin][:, xin]
            gy = (((_F(1) - xl) * (bl - tl) + xl * (br - tr)) * g).sum(axis=2, dtype=np.float64)   # [ny, nx]
            gx = (((_F(1) - yl) * (tr - tl) + yl * (br - bl)) * g).sum(axis=2, dtype=np.float64)
            ry, rx_ = gy.sum(axis=1), gx.sum(axis=0)          # by row, by column
            if ch > 1:
                out[b, 0] += (ry * (np.float64(h - 1) - yi * np.float64(hr))).sum()
                out[b, 2] += (ry * (yi * np.float64(hr))).sum()
            else:
                out[b, 0] += ry.sum() * 0.5 * (h - 1)
                out[b, 2] += ry.sum() * 0.5 * (h - 1)
            if cw > 1:
                out[b, 1] += (rx_ * (np.float64(w - 1) - xi * np.float64(wr))).sum()
                out[b, 3] += (rx_ * (xi * np.float64(wr))).sum()
            else:
                out[b, 1] += rx_.sum() * 0.5 * (w - 1)
                out[b, 3] += rx_.sum() * 0.5 * (w - 1)
        return out.astype(_F)
    return fn


# ---------------------------------------------------------------------------------------------
# Non-max suppression

def _iou_matrix(boxes):
    """TF's IOU of every pair of boxes (corners in any order; an empty box overlaps nothing), float32."""
    b = np.asarray(boxes, _F)
    ymin, ymax = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    xmin, xmax = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    area = (ymax - ymin) * (xmax - xmin)
    iy = np.maximum(np.minimum(ymax[:, None], ymax[None]) - np.maximum(ymin[:, None], ymin[None]), _F(0))
    ix = np.maximum(np.minimum(xmax[:, None], xmax[None]) - np.maximum(xmin[:, None], xmin[None]), _F(0))
    inter = (iy * ix).astype(_F)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = (inter / (area[:, None] + area[None] - inter)).astype(_F)
    bad = (area[:, None] <= 0) | (area[None] <= 0)
    return np.where(bad, _F(0), iou)


def nms(similarity, scores, max_output, threshold, score_threshold, soft_sigma=0.0):
    """TF's DoNonMaxSuppressionOp: greedy selection by score (ties: the lower index first), a
    candidate suppressed by a selected one whose similarity exceeds `threshold`, or with
    `soft_sigma` > 0 its score scaled by exp(-0.5 sim^2 / sigma). Returns (indices, scores)."""
    scores = np.asarray(scores, _F)
    score_threshold = _F(score_threshold)
    heap = [(-scores[i], i, 0, scores[i]) for i in range(scores.shape[0]) if scores[i] > score_threshold]
    heapq.heapify(heap)
    soft = soft_sigma > 0
    scale = _F(-0.5) / _F(soft_sigma) if soft else _F(0)
    threshold = _F(threshold)
    selected, sel_scores = [], []
    while len(selected) < max_output and heap:
        _, i, begin, score = heapq.heappop(heap)
        original = score
        hard = False
        for j in range(len(selected) - 1, begin - 1, -1):
            sim = _F(similarity(i, selected[j]))
            weight = _F(math.exp(_F(scale * sim * sim)))
            score = _F(score * (weight if soft or sim <= threshold else _F(0)))
            if not soft and sim > threshold:
                hard = True
                break
            if score <= score_threshold:
                break
        begin = len(selected)
        if not hard:
            if score == original:
                selected.append(i)
                sel_scores.append(score)
                continue
            if score > score_threshold:
                heapq.heappush(heap, (-score, i, begin, score))
    return np.array(selected, np.int32), np.array(sel_scores, _F)


def _nms_args(op, boxes, scores, max_output):
    boxes, scores = np.asarray(boxes), np.asarray(scores)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise InvalidArgumentError(f"{op}: boxes must be 2-D [num_boxes, 4], got shape {list(boxes.shape)}")
    if scores.shape != (boxes.shape[0],):
        raise InvalidArgumentError(f"{op}: scores must be 1-D [num_boxes] ({boxes.shape[0]}), got shape "
                                   f"{list(scores.shape)}")
    m = int(np.asarray(max_output))
    if m < 0:
        raise InvalidArgumentError(f"{op}: max_output_size must be non-negative, got {m}")
    return boxes, scores, m


def _nms_boxes(op, boxes, scores, max_output, iou, score_threshold, soft=0.0):
    boxes, scores, m = _nms_args(op, boxes, scores, max_output)
    iou = float(np.asarray(iou))
    if not 0 <= iou <= 1:
        raise InvalidArgumentError(f"{op}: iou_threshold must be in [0, 1], got {iou}")
    sim = _iou_matrix(boxes)
    return nms(lambda i, j: sim[i, j], scores, m, iou, float(np.asarray(score_threshold)), soft), m


@register_kernel("NonMaxSuppressionV3", "CPU")
def nms_v3_kernel(attrs):
    def fn(boxes, scores, max_output_size, iou_threshold, score_threshold):
        (sel, _), _ = _nms_boxes("NonMaxSuppressionV3", boxes, scores, max_output_size, iou_threshold,
                                 score_threshold)
        return sel
    return fn


@register_kernel("NonMaxSuppressionV4", "CPU")
def nms_v4_kernel(attrs):
    pad = bool(attrs.get("pad_to_max_output_size", False))

    def fn(boxes, scores, max_output_size, iou_threshold, score_threshold):
        (sel, _), m = _nms_boxes("NonMaxSuppressionV4", boxes, scores, max_output_size, iou_threshold,
                                 score_threshold)
        n = np.int32(sel.shape[0])
        if pad:
            sel = np.concatenate([sel, np.zeros(m - sel.shape[0], np.int32)])
        return sel, np.array(n, np.int32)
    return fn


@register_kernel("NonMaxSuppressionV5", "CPU")
def nms_v5_kernel(attrs):
    pad = bool(attrs.get("pad_to_max_output_size", False))

    def fn(boxes, scores, max_output_size, iou_threshold, score_threshold, soft_nms_sigma):
        sigma = float(np.asarray(soft_nms_sigma))
        if sigma < 0:
            raise InvalidArgumentError(f"NonMaxSuppressionV5: soft_nms_sigma must be non-negative, got {sigma}")
        (sel, sc), m = _nms_boxes("NonMaxSuppressionV5", boxes, scores, max_output_size, iou_threshold,
                                  score_threshold, sigma)
        n = np.int32(sel.shape[0])
        dt = np.asarray(scores).dtype
        if pad:
            sel = np.concatenate([sel, np.zeros(m - sel.shape[0], np.int32)])
            sc = np.concatenate([sc, np.zeros(m - sc.shape[0], _F)])
        return sel, sc.astype(dt), np.array(n, np.int32)
    return fn


@register_kernel("NonMaxSuppressionWithOverlaps", "CPU")
def nms_overlaps_kernel(attrs):
    def fn(overlaps, scores, max_output_size, overlap_threshold, score_threshold):
        ov = np.asarray(overlaps, _F)
        scores = np.asarray(scores)
        if ov.ndim != 2 or ov.shape[0] != ov.shape[1] or scores.shape != (ov.shape[0],):
            raise InvalidArgumentError(f"NonMaxSuppressionWithOverlaps: overlaps must be square [num_boxes, "
                                       f"num_boxes] and scores [num_boxes], got {list(ov.shape)} and "
                                       f"{list(scores.shape)}")
        m = int(np.asarray(max_output_size))
        sel, _ = nms(lambda i, j: ov[i, j], scores, m, float(np.asarray(overlap_threshold)),
                     float(np.asarray(score_threshold)))
        return sel
    return fn


@register_kernel("CombinedNonMaxSuppression", "CPU")
def combined_nms_kernel(attrs):
    pad_per_class = bool(attrs.get("pad_per_class", False))
    clip = bool(attrs.get("clip_boxes", True))

    def fn(boxes, scores, max_output_size_per_class, max_total_size, iou_threshold, score_threshold):
        op = "CombinedNonMaxSuppression"
        boxes, scores = np.asarray(boxes, _F), np.asarray(scores, _F)
        if boxes.ndim != 4 or boxes.shape[3] != 4 or scores.ndim != 3 or scores.shape[:2] != boxes.shape[:2]:
            raise InvalidArgumentError(f"{op}: boxes must be [batch, num_boxes, q, 4] and scores [batch, num_boxes, "
                                       f"num_classes], got {list(boxes.shape)} and {list(scores.shape)}")
        batch, n, q, _ = boxes.shape
        classes = scores.shape[2]
        if q not in (1, classes):
            raise InvalidArgumentError(f"{op}: third dimension of boxes must be either 1 or num_classes ({classes}), "
                                       f"got {q}")
        per_class = int(np.asarray(max_output_size_per_class))
        total = int(np.asarray(max_total_size))
        if per_class <= 0 or total <= 0:
            raise InvalidArgumentError(f"{op}: max_output_size_per_class and max_total_size must be positive")
        iou, sthr = float(np.asarray(iou_threshold)), float(np.asarray(score_threshold))
        size = min(total, per_class * classes) if pad_per_class else total
        out_boxes = np.zeros((batch, size, 4), _F)
        out_scores = np.zeros((batch, size), _F)
        out_classes = np.zeros((batch, size), _F)
        valid = np.zeros(batch, np.int32)
        for b in range(batch):
            found = []
            for c in range(classes):
                bx = boxes[b, :, 0 if q == 1 else c]
                sim = _iou_matrix(bx)
                sel, sc = nms(lambda i, j, sim=sim: sim[i, j], scores[b, :, c], per_class, iou, sthr)
                found += [(float(s), c, int(i)) for i, s in zip(sel, sc)]
            found.sort(key=lambda t: -t[0])        # stable: by class, then selection order, among equal scores
            found = found[:size]
            for k, (s, c, i) in enumerate(found):
                bx = boxes[b, i, 0 if q == 1 else c]
                out_boxes[b, k] = np.clip(bx, 0, 1) if clip else bx
                out_scores[b, k] = s
                out_classes[b, k] = c
            valid[b] = len(found)
        return out_boxes, out_scores, out_classes, valid
    return fn


# ---------------------------------------------------------------------------------------------
# DrawBoundingBoxes

_DEFAULT_COLORS = [[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1], [0.5, 0.5, 0, 1],
                   [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1]]


@register_kernel("DrawBoundingBoxes", "CPU")
def draw_bounding_boxes_v1_kernel(attrs):
    v2 = draw_bounding_boxes_kernel(attrs)
    return lambda images, boxes: v2(images, boxes, np.zeros((0, 4), _F), "DrawBoundingBoxes")


@register_kernel("DrawBoundingBoxesV2", "CPU")
def draw_bounding_boxes_kernel(attrs):
    def fn(images, boxes, colors, op="DrawBoundingBoxesV2"):
        images, boxes, colors = np.asarray(images), np.asarray(boxes, _F), np.asarray(colors, _F)
        if images.ndim != 4:
            raise InvalidArgumentError(f"{op}: The rank of the images should be 4, got shape {list(images.shape)}")
        batch, h, w, depth = images.shape
        if depth not in (1, 2, 3, 4):
            raise InvalidArgumentError(f"{op}: Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA), got "
                                       f"{depth}")
        if boxes.ndim != 3 or boxes.shape[0] != batch or boxes.shape[2] != 4:
            raise InvalidArgumentError(f"{op}: boxes must be [batch ({batch}), num_boxes, 4], got "
                                       f"{list(boxes.shape)}")
        table = colors.reshape(-1, colors.shape[-1]).tolist() if colors.size else [list(c) for c in _DEFAULT_COLORS]
        if any(len(c) < depth for c in table):
            raise InvalidArgumentError(f"{op}: colors must have at least {depth} channels")
        if depth == 1:
            table = [[1.0] + list(c[1:]) for c in table]
        canvas = images.copy()
        for b in range(batch):
            for k in range(boxes.shape[1]):
                color = np.asarray(table[k % len(table)][:depth], images.dtype)
                y0 = int(_F(boxes[b, k, 0]) * _F(h - 1))
                y1 = int(_F(boxes[b, k, 2]) * _F(h - 1))
                x0 = int(_F(boxes[b, k, 1]) * _F(w - 1))
                x1 = int(_F(boxes[b, k, 3]) * _F(w - 1))
                if y0 > y1 or x0 > x1 or y0 >= h or y1 < 0 or x0 >= w or x1 < 0:
                    continue
                y0c, y1c, x0c, x1c = max(y0, 0), min(y1, h - 1), max(x0, 0), min(x1, w - 1)
                if y0 >= 0:
                    canvas[b, y0, x0c:x1c + 1] = color
                if y1 < h:
                    canvas[b, y1, x0c:x1c + 1] = color
                if x0 >= 0:
                    canvas[b, y0c:y1c + 1, x0] = color
                if x1 < w:
                    canvas[b, y0c:y1c + 1, x1] = color
        return canvas
    return fn


# ---------------------------------------------------------------------------------------------
# SampleDistortedBoundingBoxV2

def _rint(x: float) -> int:
    """C's lrintf: to nearest, halves to even."""
    return int(np.rint(np.float32(x)))


def _area(r):
    return max(r[2] - r[0], 0) * max(r[3] - r[1], 0)


def _random_crop(gen, width, height, area_range, aspect):
    """TF's GenerateRandomCrop: a crop (min_x, min_y, max_x, max_y) of area within `area_range` of the
    image's at aspect ratio `aspect`, or None."""
    min_area = _F(area_range[0]) * _F(width) * _F(height)
    max_area = _F(area_range[1]) * _F(width) * _F(height)
    h = _rint(math.sqrt(min_area / aspect))
    max_h = _rint(math.sqrt(max_area / aspect))
    if _rint(max_h * aspect) > width:
        max_h = int((width + 0.5 - 1e-7) / aspect)
        if _rint(max_h * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:
        h += int(gen.integers(0, max_h - h + 1))
    w = _rint(h * aspect)
    area = float(w * h)
    if area < min_area:
        h += 1
        w = _rint(h * aspect)
        area = float(w * h)
    if area < min_area:
        return None
    if area > max_area:
        h -= 1
        w = _rint(h * aspect)
        area = float(w * h)
    if area < min_area or area > max_area or w > width or h > height or w <= 0 or h <= 0:
        return None
    y = int(gen.integers(0, height - h)) if h < height else 0
    x = int(gen.integers(0, width - w)) if w < width else 0
    return (x, y, x + w, y + h)


def _covers(crop, boxes, min_covered):
    """TF's SatisfiesOverlapConstraints: the crop has pixels and covers `min_covered` of some box."""
    if _area(crop) < 1:
        return False
    for b in boxes:
        a = _area(b)
        if a < 1:
            continue
        inter = (max(crop[0], b[0]), max(crop[1], b[1]), min(crop[2], b[2]), min(crop[3], b[3]))
        if _F(_area(inter)) / _F(a) >= min_covered:
            return True
    return False


@register_kernel("SampleDistortedBoundingBoxV2", "CPU", releases_gil=False)
def sample_distorted_bounding_box_kernel(attrs):
    from actorflow.kernels.cpu.random import _generator
    gen = _generator(attrs)
    aspect_range = [float(v) for v in attrs.get("aspect_ratio_range", (0.75, 1.33))]
    area_range = [float(v) for v in attrs.get("area_range", (0.05, 1.0))]
    attempts = int(attrs.get("max_attempts", 100))
    use_image = bool(attrs.get("use_image_if_no_bounding_boxes", False))
    op = "SampleDistortedBoundingBoxV2"

    def fn(image_size, bounding_boxes, min_object_covered):
        size = np.asarray(image_size)
        if size.shape != (3,):
            raise InvalidArgumentError(f"{op}: image_size must be 1-dimensional with 3 elements, got "
                                       f"{size.tolist()}")
        height, width = int(size[0]), int(size[1])
        if height <= 0 or width <= 0:
            raise InvalidArgumentError(f"{op}: image height and width must be positive, got {size.tolist()}")
        bb = np.asarray(bounding_boxes, _F)
        if bb.ndim != 3 or bb.shape[-1] != 4:
            raise InvalidArgumentError(f"{op}: bounding_boxes must be 3-D [batch, N, 4], got shape {list(bb.shape)}")
        boxes = []
        for ymin, xmin, ymax, xmax in bb.reshape(-1, 4):
            if not (0 <= ymin <= ymax <= 1 and 0 <= xmin <= xmax <= 1):
                raise InvalidArgumentError(f"{op}: bounding box [{ymin}, {xmin}, {ymax}, {xmax}] is invalid: "
                                           "coordinates must be in [0, 1], min before max")
            boxes.append((int(xmin * width), int(ymin * height), int(xmax * width), int(ymax * height)))
        image_rect = (0, 0, width, height)
        if not boxes:
            if not use_image:
                raise InvalidArgumentError(f"{op}: No bounding boxes provided as input. One must enable "
                                           "use_image_if_no_bounding_boxes if you wish to not provide any bounding "
                                           "boxes.")
            boxes.append(image_rect)
        min_covered = float(np.asarray(min_object_covered))
        crop = None
        for _ in range(attempts):
            aspect = _F(gen.random(dtype=np.float32) * _F(aspect_range[1] - aspect_range[0]) + _F(aspect_range[0]))
            c = _random_crop(gen, width, height, area_range, aspect)
            if c is not None and _covers(c, boxes, min_covered):
                crop = c
                break
        crop = crop or image_rect
        begin = np.array([crop[1], crop[0], 0], size.dtype)
        out_size = np.array([crop[3] - crop[1], crop[2] - crop[0], -1], size.dtype)
        bbox = np.array([[[crop[1] / height, crop[0] / width, crop[3] / height, crop[2] / width]]], _F)
        return begin, out_size, bbox
    return fn


# ---------------------------------------------------------------------------------------------
# ExtractGlimpse

@register_kernel("ExtractGlimpse", "CPU", releases_gil=False)
def extract_glimpse_kernel(attrs):
    """TF's ExtractGlimpse (eigen_attention.h): a [height, width] window per image at its offset
    (centred and normalized as asked, truncated to whole pixels); the part outside the image is
    uniform noise in [min, max) of that image ("zero": zeros), as TF fills it."""
    centered = bool(attrs.get("centered", True))
    normalized = bool(attrs.get("normalized", True))
    noise = attrs.get("noise", "uniform") or "uniform"
    noise = noise.decode() if isinstance(noise, bytes) else noise
    rng = np.random.default_rng()

    def fn(images, size, offsets):
        op = "ExtractGlimpse"
        x = np.asarray(images, _F)
        size = np.asarray(size).reshape(-1)
        off = np.asarray(offsets, _F)
        if x.ndim != 4:
            raise InvalidArgumentError(f"{op}: input must be 4-dimensional, got shape {list(x.shape)}")
        if size.shape != (2,) or size.min() <= 0:
            raise InvalidArgumentError(f"{op}: size must be two positive elements, got {size.tolist()}")
        b, h, w, d = x.shape
        if off.shape != (b, 2):
            raise InvalidArgumentError(f"{op}: offsets must be [batch ({b}), 2], got shape {list(off.shape)}")
        gh, gw = int(size[0]), int(size[1])
        out = np.empty((b, gh, gw, d), _F)
        for i in range(b):
            oy, ox = _F(off[i, 0]), _F(off[i, 1])
            if normalized:
                ox, oy = ox * _F(w), oy * _F(h)
            if centered:
                ox, oy = ox / _F(2) + _F(w) / _F(2), oy / _F(2) + _F(h) / _F(2)
            ox, oy = ox - _F(gw) / _F(2), oy - _F(gh) / _F(2)
            x0, y0 = int(ox), int(oy)           # (Index) x: toward zero
            src_x, dst_x, cw = max(x0, 0), max(-x0, 0), gw
            src_y, dst_y, ch = max(y0, 0), max(-y0, 0), gh
            cw = max(0, min(gw + min(x0, 0), w - src_x))
            ch = max(0, min(gh + min(y0, 0), h - src_y))
            if cw == gw and ch == gh and x0 >= 0 and y0 >= 0:
                out[i] = x[i, y0:y0 + gh, x0:x0 + gw]
                continue
            if noise == "zero":
                out[i] = 0
            elif noise == "gaussian":
                out[i] = rng.normal(x[i].mean(), x[i].std(), (gh, gw, d))
            else:
                lo, hi = x[i].min(), x[i].max()
                out[i] = lo + rng.random((gh, gw, d), dtype=np.float32) * (hi - lo)
            if cw and ch:
                out[i, dst_y:dst_y + ch, dst_x:dst_x + cw] = x[i, src_y:src_y + ch, src_x:src_x + cw]
        return out
    return fn
