//go:build tools

// Package tools pins promtool, the checker of Prometheus rule files: the
// integration test crates/agent-operator/tests/integration/alert_rules.rs
// runs `promtool check rules` and `promtool test rules` on
// deploy/prometheus/. Built from the Go module proxy (hack/promtool/install.sh)
// because no release binary can be downloaded here.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
