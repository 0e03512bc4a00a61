// Command etcd is etcd's own server, built from its published module for Tephra's real test
// tier (kept apart from tools/kube so the two dependency graphs do not constrain each other).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
