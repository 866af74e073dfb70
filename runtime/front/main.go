// Command cell-front is the part of `cell serve` that stays resident (docs/runtime.md "cell serve").
package main

func main() {}
