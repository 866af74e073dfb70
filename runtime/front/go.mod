module svc/runtime/front

go 1.24
