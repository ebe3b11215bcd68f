"""Permission policy: rules (`rules`), the decision for one call (`engine`), durable approvals (`approvals`)."""
