"""The state of a lifecycle (managed) node, without reading rclpy's private state machine.

rclpy's :class:`~rclpy.lifecycle.LifecycleNodeMixin` keeps its state in a private attribute and
offers no accessor. :class:`LifecycleStateMixin` follows the state from what a node's own
transition callbacks return, with the rules of the ROS 2 managed-node state machine
(design.ros2.org, "Managed nodes"): while a callback runs the node is in its transition state
(``configuring``...), and after it in the primary state its outcome leads to; a callback that
returns ERROR or raises leads to ``errorprocessing``, and :meth:`on_error`'s outcome decides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.lifecycle import LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn

SUCCESS, FAILURE, ERROR = (
    TransitionCallbackReturn.SUCCESS,
    TransitionCallbackReturn.FAILURE,
    TransitionCallbackReturn.ERROR,
)

#: each transition callback: the transition state while it runs, and the state each outcome leads to
#: (an outcome not listed, or an exception, leads to ``errorprocessing``)
TRANSITIONS: dict[str, tuple[str, dict[Any, str]]] = {
    "on_configure": ("configuring", {SUCCESS: "inactive", FAILURE: "unconfigured"}),
    "on_cleanup": ("cleaningup", {SUCCESS: "unconfigured", FAILURE: "inactive"}),
    "on_activate": ("activating", {SUCCESS: "active", FAILURE: "inactive"}),
    "on_deactivate": ("deactivating", {SUCCESS: "inactive", FAILURE: "active"}),
    "on_shutdown": ("shuttingdown", {SUCCESS: "finalized", FAILURE: "finalized"}),
    "on_error": ("errorprocessing", {SUCCESS: "unconfigured", FAILURE: "finalized", ERROR: "finalized"}),
}

Callback = Callable[[LifecycleState], TransitionCallbackReturn]


class LifecycleStateMixin(LifecycleNodeMixin):
    """A :class:`~rclpy.lifecycle.LifecycleNodeMixin` whose current state is :attr:`lifecycle_state`.

    Its ``__init__`` wraps the node's transition callbacks (its ``on_configure``... as the most
    derived class defines them) before rclpy registers them, so that every transition, whether
    from :meth:`trigger_configure` or from a lifecycle manager over ``~/change_state``, updates
    the state. Subclasses override ``on_*`` as usual.
    """

    def __init__(self, **kwargs: Any) -> None:
        #: the current state's label: unconfigured, inactive, active, finalized, or a transition
        #: state (configuring, ...) while a callback runs
        self.lifecycle_state = "unconfigured"
        for name, (during, after) in TRANSITIONS.items():
            # an instance attribute: rclpy registers ``self.on_configure``..., this wrapper
            setattr(self, name, self._tracked(getattr(self, name), during, after))
        LifecycleNodeMixin.__init__(self, **kwargs)

    def _tracked(self, callback: Callback, during: str, after: dict[Any, str]) -> Callback:
        def tracked(state: LifecycleState) -> TransitionCallbackReturn:
            self.lifecycle_state = during
            outcome = ERROR
            try:
                outcome = callback(state)
            finally:
                self.lifecycle_state = after.get(outcome, "errorprocessing")
            return outcome

        return tracked

    def destroy_lifecycle_services(self) -> None:
        """Destroy the lifecycle services now; call after ``destroy_node``.

        rclpy's ``destroy_node`` leaves them (they belong to its state machine) in the graph until
        the node object is garbage collected, so that another node of the same name then shares
        ``~/get_state`` with a dead one. rclpy has no public call for it: this is the one place
        where this package touches its private ``_state_machine`` (the other rclpy private it uses
        is in :mod:`lifelong_learning.nodes.runner`; both: ``docs/architecture.md``).
        """
        machine = getattr(self, "_state_machine", None)  # None: the constructor failed before it
        if machine is not None:
            machine.destroy_when_not_in_use()
