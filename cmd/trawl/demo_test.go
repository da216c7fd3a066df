package main

import "github.com/trawl-dev/trawl/tools/demo"

func demoSpec() []byte { return demo.Spec() }
