"""The feature_extractor node's crop on a real DDS graph: a region of interest, motion against a
still background, and refusals; the features are those of the very crop the library makes."""

from __future__ import annotations

import numpy as np
import pytest
from test_feature_extractor_node import PICTURE, Peer, image_message, make_node

from lifelong_learning.vision.crop import Box, MotionCrop, cut, square_box

pytestmark = pytest.mark.graph


def roi_peer(context):
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import RegionOfInterest

    peer = Peer(context)
    peer.rois = peer.node.create_publisher(RegionOfInterest, "roi", qos_profile_sensor_data)
    return peer


def region(x, y, w, h):
    from sensor_msgs.msg import RegionOfInterest

    return RegionOfInterest(x_offset=x, y_offset=y, width=w, height=h)


def published(node, pictures):
    """The features the node publishes for ``pictures``: the CNN's, normalised as the node does."""
    from lifelong_learning.vision.normalisation import normalised

    return normalised(node.extractor.extract_batch(pictures), node.normalisation)


def features_of(node, peer, executor, spin, stamp):
    assert spin(executor, lambda: any(m.header.stamp.sec == stamp for m in peer.features), 20)
    return next(np.asarray(m.data) for m in peer.features if m.header.stamp.sec == stamp)


def test_a_region_of_interest_cuts_the_frame_and_a_bad_or_stale_one_leaves_it_whole(
    executor, spin, rclpy_context
):
    node = make_node(rclpy_context, crop="roi", crop_margin=0.1, queue_size=10)
    peer = roi_peer(rclpy_context)
    executor.add_node(node)
    executor.add_node(peer.node)
    assert spin(executor, lambda: peer.connected() and peer.rois.get_subscription_count() > 0, 10)
    whole = published(node, [PICTURE])[0]
    box = Box(150, 40, 80, 60)
    cropped = published(node, [cut(PICTURE, square_box(box, PICTURE.shape, 0.1))])[0]

    peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=1))  # no box yet: the whole frame
    np.testing.assert_allclose(features_of(node, peer, executor, spin, 1), whole, atol=1e-5)
    peer.rois.publish(region(*box))
    assert spin(executor, lambda: node._roi is not None, 10)
    peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=2))
    np.testing.assert_allclose(features_of(node, peer, executor, spin, 2), cropped, atol=1e-5)
    assert np.linalg.norm(cropped - whole) > 1.0

    peer.rois.publish(region(500, 10, 20, 20))  # no pixel in the 300x200 frame: counted, whole frame
    assert spin(executor, lambda: node._roi[0].x_offset == 500, 10)
    peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=3))
    np.testing.assert_allclose(features_of(node, peer, executor, spin, 3), whole, atol=1e-5)
    assert node.rejections.snapshot().get("bad region of interest") == 1

    from rclpy.parameter import Parameter

    peer.rois.publish(region(*box))
    assert spin(executor, lambda: node._roi[0].x_offset == box.x, 10)
    assert node.set_parameters([Parameter("roi_max_age_s", value=0.0)])[0].successful  # every box is stale
    peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=4))
    np.testing.assert_allclose(features_of(node, peer, executor, spin, 4), whole, atol=1e-5)
    assert node.cropped == 1 and node.whole_frames == 3
    assert "1 frames cut, 3 whole" in node.diagnostic_values()["crop"]


#: where the depth images hold the object up (pixels of the 300x200 frame)
HELD = Box(150, 40, 80, 60)


def depth_image(encoding: str = "16UC1", held: Box = HELD):
    """A depth image of the 300x200 frame at half its resolution: the room 2.5 m away, an object held
    0.6 m away in ``held`` (full-resolution pixels)."""
    from lifelong_learning.vision.depth import DEPTH_ENCODINGS

    metres = np.full((100, 150), 2.5, dtype=np.float32)
    metres[held.y // 2 : (held.y + held.height) // 2, held.x // 2 : (held.x + held.width) // 2] = 0.6
    pixels = (metres / DEPTH_ENCODINGS[encoding]).astype(np.uint16 if encoding != "32FC1" else np.float32)
    return image_message(pixels, encoding)


def test_depth_cuts_to_the_nearest_object_greys_the_room_and_a_bad_or_stale_image_leaves_it_whole(
    executor, spin, rclpy_context
):
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from lifelong_learning.vision.depth import greyed

    # every depth image is fresh until the stale step sets 0: a loaded machine must not make it stale
    node = make_node(rclpy_context, crop="depth", crop_margin=0.1, queue_size=10, depth_max_age_s=60.0)
    peer = Peer(rclpy_context)
    peer.depth = peer.node.create_publisher(Image, "depth", qos_profile_sensor_data)
    executor.add_node(node)
    executor.add_node(peer.node)
    assert spin(executor, lambda: peer.connected() and peer.depth.get_subscription_count() > 0, 10)
    whole = published(node, [PICTURE])[0]
    held = HELD
    mask = np.zeros(PICTURE.shape[:2], dtype=bool)
    mask[held.y : held.y + held.height, held.x : held.x + held.width] = True
    cropped = published(node, [cut(greyed(PICTURE, mask), square_box(held, PICTURE.shape, 0.1))])[0]

    peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=1))  # no depth yet: the whole frame
    np.testing.assert_allclose(features_of(node, peer, executor, spin, 1), whole, atol=1e-5)
    for stamp, encoding in ((2, "16UC1"), (3, "32FC1")):
        node._depth = None
        peer.depth.publish(depth_image(encoding))
        assert spin(executor, lambda: node._depth is not None, 10)
        peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=stamp))
        np.testing.assert_allclose(features_of(node, peer, executor, spin, stamp), cropped, atol=1e-5)
    assert np.linalg.norm(cropped - whole) > 1.0

    refused = node.rejections.snapshot()
    bad = image_message(np.zeros((100, 150), dtype=np.uint8), "mono8")  # not a depth encoding
    peer.depth.publish(bad)
    assert spin(executor, lambda: node.rejections.snapshot().get("malformed depth image", 0) == 1, 10)
    assert refused.get("malformed depth image", 0) == 0
    far = image_message(np.full((100, 150), 2500, dtype=np.uint16), "16UC1")  # nothing held up
    node._depth = None
    peer.depth.publish(far)
    assert spin(executor, lambda: node._depth is not None, 10)
    peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=4))
    np.testing.assert_allclose(features_of(node, peer, executor, spin, 4), whole, atol=1e-5)

    peer.depth.publish(depth_image())
    assert spin(executor, lambda: np.nanmin(node._depth[0]) < 1.0, 10)
    assert node.set_parameters([Parameter("depth_max_age_s", value=0.0)])[0].successful  # all stale
    peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=5))
    np.testing.assert_allclose(features_of(node, peer, executor, spin, 5), whole, atol=1e-5)
    assert node.cropped == 2 and node.whole_frames == 3
    assert "depth: 2 frames cut, 3 whole" in node.diagnostic_values()["crop"]


def test_depth_range_must_be_near_then_far(rclpy_context):
    with pytest.raises(ValueError, match="depth_range_m"):
        make_node(rclpy_context, crop="depth", depth_range_m=[1.5, 0.2])


def test_motion_cuts_to_what_moves_against_the_still_background(executor, spin, rclpy_context):
    node = make_node(rclpy_context, crop="motion", queue_size=20, max_batch=1)
    peer = Peer(rclpy_context)
    executor.add_node(node)
    executor.add_node(peer.node)
    assert spin(executor, peer.connected, 10)
    rng = np.random.default_rng(0)
    background = np.ascontiguousarray(PICTURE[:, :, ::-1])  # a still room
    frames = []
    for k in range(6):
        frame = background.copy()
        frame[60 + 4 * k : 100 + 4 * k, 30 + 30 * k : 70 + 30 * k] = rng.integers(0, 255, 3)
        frames.append(frame)
    local = MotionCrop()  # what the node does, frame after frame
    expected = [
        published(node, [cut(f, None if (b := local.box(f)) is None else square_box(b, f.shape, 0.2))])[0]
        for f in frames
    ]
    for k, frame in enumerate(frames):
        peer.images.publish(image_message(frame, "rgb8", stamp_sec=k))
        features_of(node, peer, executor, spin, k)  # in order: the background's history is a stream
    for k in range(6):
        np.testing.assert_allclose(features_of(node, peer, executor, spin, k), expected[k], atol=1e-5)
    assert node.cropped == 3 and node.whole_frames == 3  # three frames before the background is known


def test_an_unknown_crop_mode_is_refused_at_start(rclpy_context):
    with pytest.raises(ValueError, match="crop must be one of"):
        make_node(rclpy_context, crop="edges")


def test_the_annotated_image_shows_the_box_and_the_answer_only_while_someone_subscribes(
    executor, spin, rclpy_context
):
    from lifelong_learning.msg import ShowingAnswer
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from lifelong_learning.vision.annotate import KNOWN, annotated
    from lifelong_learning.vision.image_conversion import image_to_numpy

    node = make_node(rclpy_context, crop="roi", crop_margin=0.1, queue_size=10, annotate=True)
    peer = roi_peer(rclpy_context)
    answers = peer.node.create_publisher(ShowingAnswer, "showing", 10)
    executor.add_node(node)
    executor.add_node(peer.node)
    assert spin(executor, lambda: peer.connected() and answers.get_subscription_count() > 0, 10)
    peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=1))  # nobody subscribes: nothing drawn
    assert spin(executor, lambda: len(peer.features) >= 1, 20)
    assert "annotate p50 [ms]" not in node.stats.summary()

    pictures = []
    peer.node.create_subscription(
        Image, "/feature_extractor/annotated", pictures.append, qos_profile_sensor_data
    )
    assert spin(executor, lambda: node.annotated_pub.get_subscription_count() > 0, 10)
    answers.publish(ShowingAnswer(showing_id=1, label="mug", confidence=0.9))
    assert spin(executor, lambda: node._answer is not None, 10)
    peer.rois.publish(region(150, 40, 80, 60))
    assert spin(executor, lambda: node._roi is not None, 10)
    stamp = 2
    while not pictures and stamp < 40:  # best effort: frames until one annotated frame comes back
        peer.images.publish(image_message(PICTURE, "rgb8", stamp_sec=stamp))
        spin(executor, lambda: bool(pictures), 1.0)
        stamp += 1
    assert pictures, "no annotated image"
    got = image_to_numpy(pictures[0])
    box = square_box(Box(150, 40, 80, 60), PICTURE.shape, 0.1)
    np.testing.assert_array_equal(got, annotated(PICTURE, box, "mug", 0.9))
    assert "annotate p50 [ms]" in node.stats.summary()
    assert tuple(got[box.y + box.height // 2, box.x]) == KNOWN


def test_motion_pastes_what_moves_onto_the_room_of_a_scene_seen_before(executor, spin, rclpy_context):
    from lifelong_learning.msg import Features

    from lifelong_learning.vision.paste import RoomPaster

    node = make_node(rclpy_context, crop="motion", queue_size=30, max_batch=1)
    peer = Peer(rclpy_context)
    pasted: list = []
    peer.node.create_subscription(Features, "pasted_features", pasted.append, 100)
    executor.add_node(node)
    executor.add_node(peer.node)
    assert spin(executor, lambda: peer.connected() and node.pasted_pub.get_subscription_count() > 0, 10)
    first = np.ascontiguousarray(PICTURE[:, :, ::-1])
    second = first // 3  # another room: most of the frame changes
    frames = []
    for room in (first, second):
        frames += [room.copy() for _ in range(3)]  # the empty room, then an object moving in it
        for k in range(4):
            frame = room.copy()
            frame[60 + 4 * k : 100 + 4 * k, 30 + 30 * k : 70 + 30 * k] = (40, 200, 90)
            frames.append(frame)
    local, paster = MotionCrop(), RoomPaster()  # what the node does, frame after frame
    expected = {}
    for stamp, frame in enumerate(frames):
        box = local.box(frame)
        paster.saw(local.scene, local.room)
        copies = paster.paste(frame, local.foreground, local.scene) if box is not None else []
        if copies:
            expected[stamp] = published(node, [cut(copies[0], square_box(box, frame.shape, 0.2))])[0]
    assert local.scene == 1 and sorted(expected) == [10, 11, 12, 13]  # the second room's moving frames
    for stamp, frame in enumerate(frames):
        peer.images.publish(image_message(frame, "rgb8", stamp_sec=stamp))
        features_of(node, peer, executor, spin, stamp)  # in order: the background's history is a stream
    assert spin(executor, lambda: len(pasted) >= len(expected), 20)
    assert sorted(m.header.stamp.sec for m in pasted) == sorted(expected)  # with their frames' stamps
    for msg in pasted:
        np.testing.assert_allclose(np.asarray(msg.data), expected[msg.header.stamp.sec], atol=1e-4)
        assert (
            np.linalg.norm(
                np.asarray(msg.data) - features_of(node, peer, executor, spin, msg.header.stamp.sec)
            )
            > 1.0
        )
    # counted after each copy is published (from the node's processing thread): waited for
    assert spin(executor, lambda: node.pasted == 4, 10), node.pasted
    assert "4 copies onto 2 rooms" in node.diagnostic_values()["pasted"]


def test_a_failed_paste_is_counted_and_its_frame_still_answered(executor, spin, rclpy_context):
    node = make_node(rclpy_context, crop="motion", queue_size=30, max_batch=1)

    def broken(*_args, **_kwargs):
        raise ValueError("a broken room")

    node._paster.paste = broken
    peer = Peer(rclpy_context)
    executor.add_node(node)
    executor.add_node(peer.node)
    assert spin(executor, peer.connected, 10)
    room = np.ascontiguousarray(PICTURE[:, :, ::-1])
    for stamp in range(6):
        frame = room.copy()
        if stamp >= 3:  # something moves: the node tries to paste it
            frame[60:100, 30 + 30 * stamp : 70 + 30 * stamp] = (40, 200, 90)
        peer.images.publish(image_message(frame, "rgb8", stamp_sec=stamp))
        features_of(node, peer, executor, spin, stamp)  # every frame answered
    # a frame's paste is tried after its features are published (from the node's processing
    # thread): the count is waited for, not read as the last frame's features arrive
    failed = lambda: node.rejections.snapshot().get("paste failed", 0)  # noqa: E731
    assert spin(executor, lambda: failed() == 3, 10), node.rejections.snapshot()
    assert node.pasted == 0
