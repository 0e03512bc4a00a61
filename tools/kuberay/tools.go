//go:build tools

// Package tools pins KubeRay's ray-operator, whose Volcano PodGroups Tephra's real tier
// schedules. Build with scripts/build-oracle.sh kuberay; nothing here is Tephra code.
package tools

import _ "github.com/ray-project/kuberay/ray-operator"
