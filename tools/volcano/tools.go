//go:build tools

// Package tools pins Volcano's own scheduler, controller-manager and webhook-manager, the oracle
// that Tephra's differential test tier runs beside Tephra. Build with scripts/build-oracle.sh
// volcano; nothing here is Tephra code.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
	_ "volcano.sh/volcano/cmd/webhook-manager"
)
