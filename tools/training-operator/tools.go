//go:build tools

// Package tools pins Kubeflow's training-operator, whose Volcano PodGroups Tephra's real tier
// schedules. Build with scripts/build-oracle.sh training-operator; nothing here is Tephra code.
package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
