# latency.gp -- latency percentiles per system for one shape (log y)
# Variables (gnuplot -e): datafile rows p50/p90/p99/p99.9, one quoted column per system (us)
#                         ncols    columns in the file (the first is the percentile name)
#                         title    the shape; outfile the PNG
set terminal pngcairo size 1000,600 noenhanced font ",11"
set output outfile
set title title . ": latency percentiles per system"
set logscale y
set ylabel "latency (us)"
set xlabel "percentile"
set format y "%g"
set grid ytics mytics
set key outside right center
set offsets 0.2, 0.2, 0, 0
plot for [c=2:ncols] datafile using 0:c:xtic(1) with linespoints lw 2 pt 7 title columnheader(c)
